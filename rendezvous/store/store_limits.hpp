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

  // With a job secret only: what connections that did not prove it get, apart from the
  // agents', so that strangers cannot starve the agents (store_server.hpp).
  // Their buffers and every key outside the agents' (ddprun/) are charged to this budget.
  std::size_t max_open_bytes = std::size_t{256} * 1024 * 1024;
  // Clients without the secret that made a request (PyTorch's); one more is closed.
  std::size_t max_guest_connections = 16384;
  // Connections that have neither made a request nor proved the secret yet; a new one closes
  // the oldest of them. Large, since a job's agents all connect at once (three connections
  // each); the descriptor limit caps it in practice (store_server.hpp).
  std::size_t max_opening_connections = 65536;
};

}  // namespace ddprun::rendezvous::store
