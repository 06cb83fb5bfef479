#pragma once
// The job secret's mutual challenge-response on the store's wire: an extension of the TCPStore
// protocol that PyTorch's clients never send. Its opcodes lie above every generation's range
// (G0 ends at 8, G1 at 11, G2 at 18), so they parse the same in each.
//
//   agent -> store  AUTH_HELLO  D0 <u8 version=2><32-byte agent nonce>
//   store -> agent  <u8 kAuthChallenge><32-byte store nonce><32-byte store proof>
//                   or <u8 kAuthNotRequired>
//   agent -> store  AUTH_PROOF  D1 <32-byte agent proof>
//   store -> agent  <u8 kAuthAccepted>   or  <u8 kAuthRefused>, then the store closes
//
//   store proof = HMAC-SHA256(secret, kAuthContext || "store" || agent nonce || store nonce)
//   agent proof = HMAC-SHA256(secret, kAuthContext || "agent" || store nonce || agent nonce)
//
// The store proves the secret first, over both nonces: an agent that holds a secret believes
// nothing from a store that cannot (one that says it needs none, answers a wrong proof, or
// closes), so whoever squats on the endpoint's port cannot steer the job. The two directions
// carry different labels and take the nonces in opposite order, so no proof is worth anything
// reflected back to its sender or in the other direction. Each side's nonce is fresh per
// connection: a recorded proof is worth nothing on another connection.
//
// A client may pipeline: AUTH_HELLO in the handshake's write, its next request in AUTH_PROOF's
// (sent once the store's proof checked out). The server answers in order and weighs the proof
// before it reads the request behind it; a refused proof closes the connection before anything
// behind it is served. Pure: no I/O.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::store {

inline constexpr std::uint8_t kAuthHelloOpcode = 0xD0;
inline constexpr std::uint8_t kAuthProofOpcode = 0xD1;
// 1 was the one-sided challenge of ddprun before the store proved itself too.
inline constexpr std::uint8_t kAuthVersion = 2;
inline constexpr std::size_t kAuthNonceBytes = 32;
inline constexpr std::size_t kAuthProofBytes = 32;

// AUTH_HELLO's reply: a challenge (the store's nonce and proof follow), or "this store has no
// secret".
inline constexpr std::uint8_t kAuthChallenge = 0;
inline constexpr std::uint8_t kAuthNotRequired = 1;
inline constexpr std::size_t kAuthChallengeBytes = 1 + kAuthNonceBytes + kAuthProofBytes;
// AUTH_PROOF's reply.
inline constexpr std::uint8_t kAuthAccepted = 0;
inline constexpr std::uint8_t kAuthRefused = 1;

// What every MAC covers first, so that a proof means nothing to any other protocol.
inline constexpr std::string_view kAuthContext = "ddprun rendezvous store auth v2\n";

// The agents' keys: those under "ddprun/" (the round's keys are ddprun/rdzv/<run_id>/...).
// With a secret, only connections that proved it touch them. PyTorch's clients never use that
// namespace: their users' keys get a "/" in front, and their own bookkeeping keys ("init/",
// counted by TCPStore's wait_for_workers) are neither.
inline constexpr std::string_view kAgentKeyPrefix = "ddprun/";
inline bool is_agent_key(std::string_view key) {
  return key.starts_with(kAgentKeyPrefix);
}

// The store's proof, and the agent's; each kAuthProofBytes bytes.
std::string store_proof(std::string_view secret, std::string_view agent_nonce,
                        std::string_view store_nonce);
std::string agent_proof(std::string_view secret, std::string_view store_nonce,
                        std::string_view agent_nonce);

std::string auth_hello_request(std::string_view agent_nonce);
std::string auth_proof_request(std::string_view proof);

// Why a store is not to be trusted with this job, said to a user after "the store at
// HOST:PORT"; each ends saying what it may mean.
inline constexpr std::string_view kStoreTakesNoSecret =
    "does not know the job secret: it says it needs none. Another process may hold the port "
    "(a store without the secret, started before this job), or the store was started without "
    "the secret";
inline constexpr std::string_view kStoreProofWrong =
    "does not know the job secret: its proof of it is wrong. Another process may hold the port "
    "(a store of another job or an impostor), or the secrets differ";
inline constexpr std::string_view kStoreClosedAtHello =
    "does not know the job secret: it closed the connection when asked to prove it (PyTorch's "
    "own TCPStore, or another program, may hold the port)";

// An agent's side of the challenge, pure. `reply_status` and `challenge` are AUTH_HELLO's reply
// (challenge: the store's nonce then its proof, kAuthNonceBytes + kAuthProofBytes bytes).
struct AgentAnswer {
  std::string proof_request;                // AUTH_PROOF to send, when the store proved it
  std::optional<std::string_view> refusal;  // else why the store is not trusted
};
AgentAnswer answer_store_challenge(std::string_view secret, std::string_view agent_nonce,
                                   std::uint8_t reply_status, std::string_view challenge);

}  // namespace ddprun::rendezvous::store
