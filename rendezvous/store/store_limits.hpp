#pragma once
// Limits the server enforces on untrusted input. Defaults are at least PyTorch's libuv
// server's (8 KiB key, 8 MiB value, 131072 keys per request); see tcpstore_protocol.md §6.2.

#include <cstddef>

namespace ddprun::rendezvous::store {

struct StoreLimits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys_per_request = 131072;
  // Everything the server holds for clients: stored keys and values, queued items, wait
  // registrations, and bytes buffered in and out of connections.
  std::size_t max_total_bytes = std::size_t{4} * 1024 * 1024 * 1024;  // memory budget
  std::size_t max_connections = 65536;
};

}  // namespace ddprun::rendezvous::store
