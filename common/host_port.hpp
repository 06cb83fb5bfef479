#pragma once
// HOST, HOST:PORT, [IPV6] or [IPV6]:PORT: how --rdzv_endpoint and etcd's member list write an
// address. One parser, so that both read the same text the same way; what a missing port or
// port 0 means is the caller's to decide. Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::common {

struct HostPort {
  std::string host;  // without brackets
  std::optional<std::uint16_t> port;
};

// Throws std::invalid_argument saying what is wrong with `text` (the caller names the option).
// A host is letters, digits, '.', '-' and '_' (PyTorch's rendezvous/utils.py), and ':' inside
// brackets; a port is 0-65535 in decimal.
HostPort parse_host_port(std::string_view text);

}  // namespace ddprun::common
