#pragma once
// The bytes of each TCPStore request StoreKv sends, in one wire generation (G0: PyTorch <= 2.0;
// G2: 2.2+ and our server). Pure encoding: no I/O, no state beyond the generation.
// See shared/reference/tcpstore_protocol.md §3-§4 for the layouts.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::backends {

class StoreKvRequests {
 public:
  explicit StoreKvRequests(store::WireGeneration generation) : generation_(generation) {}

  store::WireGeneration generation() const { return generation_; }
  // G2 has APPEND, MULTI_GET, MULTI_SET and CANCEL_WAIT; G0 has none of them.
  bool has_batch_commands() const { return generation_ != store::WireGeneration::g0; }

  std::string set(std::string_view key, std::string_view value) const;
  std::string get(std::string_view key) const;
  std::string add(std::string_view key, int64_t delta) const;
  // An empty `expected` means "only if the key does not exist" (TCPStore's convention).
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) const;
  std::string append(std::string_view key, std::string_view value) const;
  std::string check(const std::vector<std::string>& keys) const;
  std::string wait(const std::vector<std::string>& keys) const;
  std::string multi_get(const std::vector<std::string>& keys) const;
  std::string multi_set(const std::vector<std::string>& keys,
                        const std::vector<std::string>& values) const;
  std::string cancel_wait() const;
  // CHECK of no keys: answered READY at once by every server of every generation. Confirms
  // that the requests before it were applied, and serves as G0's handshake.
  std::string fence() const { return check({}); }
  // G2's opening: VALIDATE, then PING with a nonce the server echoes.
  static std::string validate_and_ping(uint32_t nonce);
  // G2's opening for servers without PING (PyTorch 2.2 to 2.4): VALIDATE, then `counts`
  // GETNUMKEYS.
  static std::string validate_and_count(std::size_t counts);

 private:
  uint8_t opcode(store::Command command) const;

  store::WireGeneration generation_;
};

}  // namespace ddprun::rendezvous::backends
