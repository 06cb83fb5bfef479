#pragma once
// One decoded client request, independent of the wire generation it came in.

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::store {

struct Request {
  Command command = Command::get_num_keys;
  // The key(s) named: one for keyed commands, n for CHECK/WAIT/MULTI_GET/MULTI_SET, the queue
  // name for queue commands.
  std::vector<std::string> keys;
  // SET/APPEND/QUEUE_PUSH: {value}; AUTH_PROOF: {proof}; COMPARE_SET: {expected, desired};
  // MULTI_SET: one per key.
  std::vector<std::string> values;
  // ADD: the delta. BARRIER: the world size.
  std::int64_t integer = 0;
  // PING: the nonce to echo. VALIDATE: the magic received. AUTH_HELLO: the version.
  std::uint32_t word = 0;
  // LIST_KEYS on a connection that did not prove the job secret: the agents' key names are
  // left out, as their values are (set by the connection, never by the wire).
  bool hide_agent_keys = false;
};

}  // namespace ddprun::rendezvous::store
