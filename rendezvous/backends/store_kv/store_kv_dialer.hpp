#pragma once
// Opens ready-to-use StoreKv connections: resolves the store's address, connects, and opens
// the conversation in the wire generation the server speaks, retrying failed attempts with
// jittered exponential backoff until a deadline.
//
// Generation: until one opening worked, three are tried in turn on fresh connections, each
// only after the server dropped the one before:
//   1. G2 with PING (PyTorch >= 2.5, ours): VALIDATE, then PING with a nonce to echo.
//   2. G2 without PING (PyTorch 2.2 to 2.4 drop a PING): VALIDATE, then GETNUMKEYS.
//   3. G0 (PyTorch <= 2.0; 2.1's G1 numbers every opcode StoreKv uses in G0 the same): a CHECK
//      of no keys.
// A G0 server reads either G2 opening as a SET whose u64 key length spans the VALIDATE magic
// and the bytes after it; both openings make that length at least 2^56, so the server fails
// at once instead of allocating or waiting for the bytes. Whichever opening worked is
// remembered and used for every later connection.
//
// Job secret (store/job_auth.hpp), proved both ways without a round trip of its own: AUTH_HELLO
// leaves in the handshake's write (after the handshake's reply only on the fallback openings,
// see handshake()); the store's proof comes back with its challenge and is checked before
// anything else is sent (a store that cannot prove the secret fails the dial with kRejected,
// and nothing is asked of it); the connection is handed over as soon as AUTH_PROOF is queued,
// so the owner's first request leaves in the proof's write. The server weighs the proof before
// it reads that request and, refusing it, closes the connection without serving it; the
// REFUSED verdict then fails every request on the connection with kRejected.
//
// Threading: one io_context thread; the dial callback never runs inside dial(). A host name
// that is not an address literal is resolved synchronously (getaddrinfo), as Asio's
// asynchronous resolver would start a thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/backends/store_kv/store_kv_connection.hpp"
#include "rendezvous/store/asio.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::backends {

class StoreKvDialer {
 public:
  using Clock = std::chrono::steady_clock;
  using Failure = StoreKvConnection::Failure;
  // Exactly one of the two is set.
  using Done = std::function<void(std::shared_ptr<StoreKvConnection>, std::optional<Failure>)>;

  struct Settings {
    std::string host;
    uint16_t port = 0;
    StoreKvConnection::Limits limits;
    // The job secret; set: every connection proves it knows it (store/job_auth.hpp) before use.
    std::string secret;
  };

  StoreKvDialer(boost::asio::io_context& io, Settings settings);
  StoreKvDialer(const StoreKvDialer&) = delete;
  StoreKvDialer& operator=(const StoreKvDialer&) = delete;
  ~StoreKvDialer();

  // Calls done once with a connection whose handshake succeeded, or with why there is none
  // (the reason does not name the store; the caller does):
  // kUnreachable when no attempt got through within `budget` (refused, reset, no route);
  // kUnresponsive when the server accepted but did not answer the handshake within the
  // operation timeout; kProtocol when it answered wrongly; kRejected when, holding a job
  // secret, the store does not prove that it knows it (it takes none, closes at AUTH_HELLO, or
  // its proof is wrong). The agent's wrong secret comes later, on the connection: its requests
  // fail with kRejected ("wrong job secret").
  // Attempts go on until the budget is spent, and a handshake in progress may finish up to one
  // operation timeout after that.
  void dial(std::chrono::milliseconds budget, Done done);

  // The generation the server speaks, once a handshake succeeded.
  std::optional<store::WireGeneration> generation() const;

  // Stops every attempt; no done callback runs afterwards.
  void abandon();

 private:
  struct Attempt;
  enum class Opening : uint8_t { g2_with_ping, g2_without_ping, g0 };

  void try_connect(const std::shared_ptr<Attempt>& attempt);
  void handshake(const std::shared_ptr<Attempt>& attempt);
  // Sends AUTH_HELLO; its challenge's handler checks the store's proof, then sends the
  // agent's and finishes (or fails the dial when the store did not prove the secret).
  void ask_challenge(const std::shared_ptr<Attempt>& attempt);
  // Sends AUTH_PROOF; a refusal, whenever it comes, fails the connection with kRejected.
  void send_proof(StoreKvConnection& connection, const std::string& proof_request) const;
  void on_handshake_failed(const std::shared_ptr<Attempt>& attempt, const Failure& failure);
  void retry_later(const std::shared_ptr<Attempt>& attempt, const std::string& error);
  void finish(const std::shared_ptr<Attempt>& attempt, std::shared_ptr<StoreKvConnection> done,
              std::optional<Failure> failure);
  std::optional<std::vector<boost::asio::ip::tcp::endpoint>> resolve(std::string& error);

  boost::asio::io_context& io_;
  Settings settings_;
  std::optional<Opening> opening_;  // the one that worked
  std::mt19937 jitter_;
  std::set<std::shared_ptr<Attempt>> attempts_;
};

}  // namespace ddprun::rendezvous::backends
