#include "rendezvous/store/auth_gate.hpp"

#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/sha256.hpp"
#include "rendezvous/store/store_log.hpp"

namespace ddprun::rendezvous::store {
namespace {

std::string status(std::uint8_t code) {
  return std::string(1, static_cast<char>(code));
}

}  // namespace

AuthGate::Answer AuthGate::answer(const Request& request, std::string fresh_nonce) {
  if (request.command == Command::auth_hello) {
    return challenge(request, std::move(fresh_nonce));
  }
  if (request.command == Command::auth_proof && request.values.size() == 1) {
    return verdict(request);
  }
  return {"", "not an authentication request"};
}

AuthGate::Answer AuthGate::challenge(const Request& hello, std::string fresh_nonce) {
  if (secret_.empty()) {
    return {status(kAuthNotRequired), std::nullopt};
  }
  if (asked_) {
    // One challenge per connection: a client could otherwise have the store compute proofs
    // over nonces of its choosing for as long as it likes.
    return {"", "a second AUTH_HELLO on one connection"};
  }
  if (hello.values.size() != 1 || hello.values.front().size() != kAuthNonceBytes) {
    return {"", "AUTH_HELLO without the agent's nonce"};
  }
  if (fresh_nonce.size() != kAuthNonceBytes || fresh_nonce == hello.values.front()) {
    return {"", "no challenge could be made"};
  }
  asked_ = true;
  agent_nonce_ = hello.values.front();
  store_nonce_ = std::move(fresh_nonce);
  return {status(kAuthChallenge) + store_nonce_ + store_proof(secret_, agent_nonce_, store_nonce_),
          std::nullopt};
}

AuthGate::Answer AuthGate::verdict(const Request& proof) {
  if (store_nonce_.empty()) {
    return {"", "AUTH_PROOF without a challenge outstanding"};
  }
  const std::string expected = agent_proof(secret_, store_nonce_, agent_nonce_);
  store_nonce_.clear();  // one proof per challenge
  agent_nonce_.clear();
  if (!equal_in_constant_time(proof.values.front(), expected)) {
    return {status(kAuthRefused), "refused an agent: wrong job secret"};
  }
  authenticated_ = true;
  return {status(kAuthAccepted), std::nullopt};
}

std::optional<std::string> AuthGate::refusal(const Request& request) const {
  for (const auto& key : request.keys) {
    if (auto refused = refusal(request.command, key)) {
      return refused;
    }
  }
  return request.keys.empty() ? refusal(request.command, std::nullopt) : std::nullopt;
}

std::optional<std::string> AuthGate::refusal(Command command,
                                             std::optional<std::string_view> first_key) const {
  if (authenticated_ || secret_.empty()) {
    return std::nullopt;
  }
  if (proving() && command != Command::ping && command != Command::auth_proof) {
    return std::string(command_name(command)) +
           " while the connection was proving the job secret (only AUTH_PROOF and PING may "
           "come before the proof)";
  }
  if (first_key && is_agent_key(*first_key)) {
    return std::string(command_name(command)) + " of the agents' key '" +
           printable_key(*first_key) + "' without the job secret (the connection did not prove it)";
  }
  return std::nullopt;
}

}  // namespace ddprun::rendezvous::store
