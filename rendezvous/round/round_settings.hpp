#pragma once
// The c10d --rdzv_conf keys with torchrun's defaults, read from LaunchConfig::rdzv_conf.
// Durations are common::Seconds from here on.

#include <map>
#include <optional>
#include <string>

#include "common/seconds.hpp"
#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {

struct RdzvSettings {
  common::Seconds join_timeout{600};
  common::Seconds last_call_timeout{30};
  common::Seconds close_timeout{30};
  common::Seconds keep_alive_interval{5};
  int keep_alive_max_attempt = 3;
  common::Seconds heartbeat_timeout{5};  // how long one heartbeat write may take
  common::Seconds read_timeout{60};      // store operations without their own limit
  std::optional<bool> is_host;           // forced store-host role; unset: detect
};

// A --rdzv_conf value the protocol cannot take: which key, what is wrong, what is expected.
class RdzvConfError : public RendezvousError {
 public:
  RdzvConfError(std::string bad_key, std::string what_is_wrong, std::string what_is_expected)
      : RendezvousError("--rdzv_conf " + bad_key + ": " + what_is_wrong + "; expected " +
                        what_is_expected),
        key(std::move(bad_key)),
        problem(std::move(what_is_wrong)),
        expected(std::move(what_is_expected)) {}
  std::string key;
  std::string problem;
  std::string expected;
};

// Parses the keys this backend knows; unknown keys are ignored as torchrun does. Throws
// RendezvousError naming the key and the value when a value is not a positive number or a bool.
RdzvSettings parse_rdzv_settings(const std::map<std::string, std::string>& rdzv_conf);

}  // namespace ddprun::rendezvous::round
