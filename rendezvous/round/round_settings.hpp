#pragma once
// The c10d --rdzv_conf keys with torchrun's defaults, read from LaunchConfig::rdzv_conf.

#include <map>
#include <optional>
#include <string>

namespace ddprun::rendezvous::round {

struct RdzvSettings {
  double join_timeout_s = 600;
  double last_call_timeout_s = 30;
  double close_timeout_s = 30;
  double keep_alive_interval_s = 5;
  int keep_alive_max_attempt = 3;
  double heartbeat_timeout_s = 5;  // how long one heartbeat write may take
  double read_timeout_s = 60;      // store operations without their own limit
  std::optional<bool> is_host;     // forced store-host role; unset: detect
};

// Parses the keys this backend knows; unknown keys are ignored as torchrun does. Throws
// RendezvousError naming the key and the value when a value is not a positive number or a bool.
RdzvSettings parse_rdzv_settings(const std::map<std::string, std::string>& rdzv_conf);

}  // namespace ddprun::rendezvous::round
