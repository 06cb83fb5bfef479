#include "rendezvous/store/job_auth.hpp"

#include "rendezvous/store/sha256.hpp"
#include "rendezvous/store/wire_codec.hpp"

namespace ddprun::rendezvous::store {
namespace {

std::string labelled_mac(std::string_view secret, std::string_view label, std::string_view first,
                         std::string_view second) {
  std::string message(kAuthContext);
  message.append(label);
  message.append(first);
  message.append(second);
  const auto mac = hmac_sha256(secret, message);
  return {reinterpret_cast<const char*>(mac.data()), mac.size()};
}

}  // namespace

std::string store_proof(std::string_view secret, std::string_view agent_nonce,
                        std::string_view store_nonce) {
  return labelled_mac(secret, "store", agent_nonce, store_nonce);
}

std::string agent_proof(std::string_view secret, std::string_view store_nonce,
                        std::string_view agent_nonce) {
  return labelled_mac(secret, "agent", store_nonce, agent_nonce);
}

std::string auth_hello_request(std::string_view agent_nonce) {
  std::string request;
  wire::append_u8(request, kAuthHelloOpcode);
  wire::append_u8(request, kAuthVersion);
  request.append(agent_nonce);
  return request;
}

std::string auth_proof_request(std::string_view proof) {
  std::string request;
  wire::append_u8(request, kAuthProofOpcode);
  request.append(proof);
  return request;
}

AgentAnswer answer_store_challenge(std::string_view secret, std::string_view agent_nonce,
                                   std::uint8_t reply_status, std::string_view challenge) {
  if (reply_status == kAuthNotRequired) {
    return {"", kStoreTakesNoSecret};
  }
  if (reply_status != kAuthChallenge || challenge.size() != kAuthNonceBytes + kAuthProofBytes) {
    return {"", kStoreProofWrong};
  }
  const auto store_nonce = challenge.substr(0, kAuthNonceBytes);
  const auto proof = challenge.substr(kAuthNonceBytes);
  // A store that echoes the agent's own nonce could hope to make the two proofs' inputs meet.
  if (store_nonce == agent_nonce ||
      !equal_in_constant_time(proof, store_proof(secret, agent_nonce, store_nonce))) {
    return {"", kStoreProofWrong};
  }
  return {auth_proof_request(agent_proof(secret, store_nonce, agent_nonce)), std::nullopt};
}

}  // namespace ddprun::rendezvous::store
