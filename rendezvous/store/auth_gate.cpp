#include "rendezvous/store/auth_gate.hpp"

#include <algorithm>

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
    if (secret_.empty()) {
      return {status(kAuthNotRequired), std::nullopt};
    }
    if (authenticated_) {
      return {"", "AUTH_HELLO after the connection authenticated"};
    }
    if (fresh_nonce.size() != kAuthNonceBytes) {
      return {"", "no challenge could be made"};
    }
    nonce_ = std::move(fresh_nonce);
    return {status(kAuthChallenge) + nonce_, std::nullopt};
  }
  if (request.command != Command::auth_proof || request.values.size() != 1) {
    return {"", "not an authentication request"};
  }
  if (nonce_.empty()) {
    return {"", "AUTH_PROOF without a challenge outstanding"};
  }
  const std::string expected = auth_proof(secret_, nonce_);
  nonce_.clear();  // one proof per challenge
  if (!equal_in_constant_time(request.values.front(), expected)) {
    return {status(kAuthRefused), "refused an agent: wrong job secret"};
  }
  authenticated_ = true;
  return {status(kAuthAccepted), std::nullopt};
}

std::optional<std::string> AuthGate::refusal(const Request& request) const {
  if (authenticated_ || secret_.empty()) {
    return std::nullopt;
  }
  const auto agent_key = std::find_if(request.keys.begin(), request.keys.end(),
                                      [](const std::string& key) { return is_agent_key(key); });
  if (agent_key == request.keys.end()) {
    return std::nullopt;
  }
  return std::string(command_name(request.command)) + " of the agents' key '" +
         printable_key(*agent_key) + "' without the job secret (the connection did not prove it)";
}

}  // namespace ddprun::rendezvous::store
