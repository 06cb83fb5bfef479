// libFuzzer target for the job secret's mutual handshake, both ways. The first byte picks the
// side:
// - even: the store's side. The rest is what a connection to a store with a job secret feeds
//   it: generation detection, the decoder (the extension's requests among PyTorch's), and the
//   connection's AuthGate. A finding: a crash or sanitizer report, a gate that lets an agents'
//   key through without the right proof, that accepts a proof that is not the agent's HMAC
//   over its own challenge, or that serves anything but PING while a proof is outstanding.
// - odd: the agent's side. The rest is a store's reply to AUTH_HELLO (status, nonce, proof).
//   A finding: an agent that answers a store whose proof is not the store's HMAC over both
//   nonces, or whose answer is not the agent's proof.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "rendezvous/store/auth_gate.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/request_decoder.hpp"
#include "tests/rendezvous/fuzz/next_request.hpp"

using namespace ddprun::rendezvous::store;

namespace {

const std::string kSecret = "fuzz-secret-0123456789";

bool touches_agent_key(const Request& request) {
  for (const auto& key : request.keys) {
    if (is_agent_key(key)) {
      return true;
    }
  }
  return false;
}

void fuzz_store_side(std::span<const std::uint8_t> input) {
  StoreLimits limits;
  limits.max_value_bytes = 1 << 16;
  limits.max_keys_per_request = 1024;
  const auto generation = detect_generation(input, WireGeneration::g0);
  if (!generation) {
    return;
  }
  AuthGate gate(kSecret);
  bool proved = false;
  std::string agent_nonce;
  std::string store_nonce;
  std::uint8_t counter = 0;
  while (const auto next = fuzzing::next_request(input, *generation, limits)) {
    const Request& request = *next;
    const bool was_proving = gate.proving();
    if (request.command == Command::auth_hello || request.command == Command::auth_proof) {
      // A nonce that differs per challenge, as the server's random ones do.
      const std::string nonce(kAuthNonceBytes, static_cast<char>(++counter));
      const bool hello = request.command == Command::auth_hello;
      const auto answer = gate.answer(request, hello ? nonce : std::string());
      if (hello && !answer.close_reason) {
        agent_nonce = request.values.at(0);
        store_nonce = nonce;
        if (answer.reply != std::string(1, static_cast<char>(kAuthChallenge)) + nonce +
                                store_proof(kSecret, agent_nonce, nonce)) {
          std::abort();  // the store's proof is not its HMAC over both nonces
        }
      }
      if (!hello && !answer.close_reason) {
        if (store_nonce.empty() ||
            request.values.at(0) != agent_proof(kSecret, store_nonce, agent_nonce)) {
          std::abort();  // accepted a proof that is not the agent's HMAC of its challenge
        }
        proved = true;
      }
      if (!hello) {
        store_nonce.clear();
      }
      if (answer.close_reason) {
        break;
      }
      continue;
    }
    const auto refusal = gate.refusal(request);
    if (touches_agent_key(request) && !proved && !refusal) {
      std::abort();  // an agents' key served without the proof
    }
    if (was_proving && request.command != Command::ping && !refusal) {
      std::abort();  // a request served while the proof was outstanding
    }
    if (refusal) {
      break;
    }
  }
}

void fuzz_agent_side(std::span<const std::uint8_t> reply) {
  if (reply.empty()) {
    return;
  }
  const std::string agent_nonce(kAuthNonceBytes, '\x5a');
  const std::string challenge(reinterpret_cast<const char*>(reply.data()) + 1, reply.size() - 1);
  const auto answer = answer_store_challenge(kSecret, agent_nonce, reply[0], challenge);
  if (answer.refusal) {
    if (!answer.proof_request.empty()) {
      std::abort();  // refused, yet an answer to send
    }
    return;
  }
  const bool well_formed =
      reply[0] == kAuthChallenge && challenge.size() == kAuthNonceBytes + kAuthProofBytes;
  const std::string store_nonce = challenge.substr(0, kAuthNonceBytes);
  if (!well_formed ||
      challenge.substr(kAuthNonceBytes) != store_proof(kSecret, agent_nonce, store_nonce) ||
      answer.proof_request != auth_proof_request(agent_proof(kSecret, store_nonce, agent_nonce))) {
    std::abort();  // believed a store that did not prove the secret, or answered wrongly
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    fuzz_store_side(rest);
  } else {
    fuzz_agent_side(rest);
  }
  return 0;
}
