// libFuzzer target: arbitrary bytes as a connection to a store with a job secret would feed
// them: generation detection, the decoder (the extension's requests among PyTorch's), and the
// connection's AuthGate. Any crash or sanitizer report is a finding, and so is a gate that
// lets an agents' key through without the right proof, or accepts a proof that is not the
// HMAC of its own challenge.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "rendezvous/store/auth_gate.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/request_decoder.hpp"

using namespace ddprun::rendezvous::store;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string kSecret = "fuzz-secret";
  StoreLimits limits;
  limits.max_value_bytes = 1 << 16;
  limits.max_keys_per_request = 1024;
  std::span<const std::uint8_t> input(data, size);
  const auto generation = detect_generation(input, WireGeneration::g0);
  if (!generation) {
    return 0;
  }
  AuthGate gate(kSecret);
  bool proved = false;
  std::string challenge;
  std::uint8_t counter = 0;
  while (!input.empty()) {
    auto result = decode_request(input, *generation, limits);
    if (result.status != DecodeStatus::complete) {
      if (result.status == DecodeStatus::need_more && result.min_bytes <= input.size()) {
        std::abort();  // need_more must ask for bytes we do not have
      }
      break;
    }
    if (result.consumed == 0 || result.consumed > input.size()) {
      std::abort();
    }
    input = input.subspan(result.consumed);
    const Request& request = result.request;
    if (request.command == Command::auth_hello || request.command == Command::auth_proof) {
      // A nonce that differs per challenge, as the server's random ones do.
      const std::string nonce(kAuthNonceBytes, static_cast<char>(++counter));
      const bool hello = request.command == Command::auth_hello;
      const auto answer = gate.answer(request, hello ? nonce : std::string());
      if (hello && !answer.close_reason) {
        challenge = nonce;
      }
      if (!hello && !answer.close_reason) {
        if (challenge.empty() || request.values.at(0) != auth_proof(kSecret, challenge)) {
          std::abort();  // accepted a proof that is not the HMAC of its challenge
        }
        proved = true;
      }
      if (!hello) {
        challenge.clear();
      }
      if (answer.close_reason) {
        break;
      }
      continue;
    }
    const auto refusal = gate.refusal(request);
    bool touches_agent_key = false;
    for (const auto& key : request.keys) {
      touches_agent_key = touches_agent_key || is_agent_key(key);
    }
    if (touches_agent_key && !proved && !refusal) {
      std::abort();  // an agents' key served without the proof
    }
    if (refusal) {
      break;
    }
  }
  return 0;
}
