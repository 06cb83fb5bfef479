#include "rendezvous/store/job_auth.hpp"

#include "rendezvous/store/sha256.hpp"
#include "rendezvous/store/wire_codec.hpp"

namespace ddprun::rendezvous::store {

std::string auth_proof(std::string_view secret, std::string_view nonce) {
  std::string message(kAuthContext);
  message.append(nonce);
  const auto mac = hmac_sha256(secret, message);
  return {reinterpret_cast<const char*>(mac.data()), mac.size()};
}

std::string auth_hello_request() {
  std::string request;
  wire::append_u8(request, kAuthHelloOpcode);
  wire::append_u8(request, kAuthVersion);
  return request;
}

std::string auth_proof_request(std::string_view proof) {
  std::string request;
  wire::append_u8(request, kAuthProofOpcode);
  request.append(proof);
  return request;
}

}  // namespace ddprun::rendezvous::store
