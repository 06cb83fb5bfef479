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
};

}  // namespace ddprun::rendezvous::store
