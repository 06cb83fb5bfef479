#pragma once
// One connection's standing with the job secret (job_auth.hpp), as the server decides it:
// which challenge is outstanding, whether the connection proved the secret, and which requests
// it may make before it did. Pure: the nonce comes in as a value, the replies go out as bytes.

#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/store/request.hpp"

namespace ddprun::rendezvous::store {

class AuthGate {
 public:
  // secret empty: no secret, every request is allowed and AUTH_HELLO answers NOT_REQUIRED.
  // The secret must outlive the gate (the server's options hold it).
  explicit AuthGate(std::string_view secret) : secret_(secret) {}

  bool requires_secret() const { return !secret_.empty(); }
  // The connection proved the secret.
  bool authenticated() const { return authenticated_; }
  // The connection asked for a challenge and has not proved the secret yet: only PING and
  // AUTH_PROOF may follow.
  bool proving() const { return asked_ && !authenticated_; }

  // What to send for AUTH_HELLO or AUTH_PROOF, and, when set, why the connection must be
  // closed after sending it. `fresh_nonce`: kAuthNonceBytes random bytes, used when a secret is
  // set (a challenge never repeats, so a recorded proof is worth nothing).
  struct Answer {
    std::string reply;
    std::optional<std::string> close_reason;
  };
  Answer answer(const Request& request, std::string fresh_nonce);

  // Why this request may not be served on this connection (an agents' key before the
  // connection proved the secret, or anything but PING while it is proving it), or nullopt
  // when it may.
  std::optional<std::string> refusal(const Request& request) const;
  // The same for a request still arriving, from its command and, once read, its first key:
  // so that a refused request is refused before its value is buffered.
  std::optional<std::string> refusal(Command command,
                                     std::optional<std::string_view> first_key) const;

  // Whether this connection may learn of the agents' keys at all (LIST_KEYS).
  bool sees_agent_keys() const { return authenticated_ || secret_.empty(); }

 private:
  Answer challenge(const Request& hello, std::string fresh_nonce);
  Answer verdict(const Request& proof);

  std::string_view secret_;
  std::string agent_nonce_;  // of the challenge outstanding; empty: none
  std::string store_nonce_;
  bool asked_ = false;
  bool authenticated_ = false;
};

}  // namespace ddprun::rendezvous::store
