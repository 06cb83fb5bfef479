#pragma once
// The job secret's challenge-response on the store's wire: an extension of the TCPStore
// protocol that PyTorch's clients never send. Its opcodes lie above every generation's range
// (G0 ends at 8, G1 at 11, G2 at 18), so they parse the same in each.
//
//   agent -> store  AUTH_HELLO  D0 <u8 version=1>
//   store -> agent  <u8 kAuthChallenge><32-byte nonce>   or  <u8 kAuthNotRequired>
//   agent -> store  AUTH_PROOF  D1 <32 bytes: HMAC-SHA256(secret, kAuthContext || nonce)>
//   store -> agent  <u8 kAuthAccepted>   or  <u8 kAuthRefused>, then the store closes
//
// A client may pipeline: AUTH_HELLO in the handshake's write, its next request in AUTH_PROOF's.
// The server answers in order and weighs the proof before it reads the request behind it; a
// refused proof closes the connection before anything behind it is served.
//
// The secret never crosses the wire; the nonce is fresh per connection, so a recorded proof
// is worth nothing on another connection. Pure: no I/O.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::store {

inline constexpr std::uint8_t kAuthHelloOpcode = 0xD0;
inline constexpr std::uint8_t kAuthProofOpcode = 0xD1;
inline constexpr std::uint8_t kAuthVersion = 1;
inline constexpr std::size_t kAuthNonceBytes = 32;
inline constexpr std::size_t kAuthProofBytes = 32;

// AUTH_HELLO's reply: a challenge (the nonce follows), or "this store has no secret".
inline constexpr std::uint8_t kAuthChallenge = 0;
inline constexpr std::uint8_t kAuthNotRequired = 1;
// AUTH_PROOF's reply.
inline constexpr std::uint8_t kAuthAccepted = 0;
inline constexpr std::uint8_t kAuthRefused = 1;

// What the MAC covers besides the nonce, so that a proof means nothing to any other protocol.
inline constexpr std::string_view kAuthContext = "ddprun rendezvous store auth v1\n";

// The agents' keys: those under "ddprun/" (the round's keys are ddprun/rdzv/<run_id>/...).
// With a secret, only connections that proved it touch them. PyTorch's clients never use that
// namespace: their users' keys get a "/" in front, and their own bookkeeping keys ("init/",
// counted by TCPStore's wait_for_workers) are neither.
inline constexpr std::string_view kAgentKeyPrefix = "ddprun/";
inline bool is_agent_key(std::string_view key) {
  return key.starts_with(kAgentKeyPrefix);
}

// HMAC-SHA256(secret, kAuthContext || nonce), kAuthProofBytes bytes.
std::string auth_proof(std::string_view secret, std::string_view nonce);

std::string auth_hello_request();
std::string auth_proof_request(std::string_view proof);

}  // namespace ddprun::rendezvous::store
