#pragma once
// A blocking client of a TCPStore-protocol server (ours or PyTorch's), for the tests (the
// agents use rendezvous/backends/store_kv, on their event loop); no LibTorch. Not thread-safe:
// give each thread its own client. Keys go on the wire exactly as given: PyTorch's TCPStore
// puts "/" in front of user keys, so to meet a Python worker's key "k" use "/k".

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::store {

// Any failure to reach the store or a broken connection after retries.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking operation (get, wait) ran past its timeout. The connection stays usable.
class StoreTimeout : public StoreError {
 public:
  using StoreError::StoreError;
};

// The store accepted the request (or the connection) but did not answer within op_timeout:
// slow, or its host unreachable, rather than gone (a gone store refuses or resets, which is a
// plain StoreError). The connection was dropped; the next call reconnects.
class StoreUnresponsive : public StoreError {
 public:
  using StoreError::StoreError;
};

// The store refused the job secret, or did not prove that it knows it (it takes none, or its
// proof is wrong). Never retried: the same store would answer the same.
class StoreAuthRefused : public StoreError {
 public:
  using StoreError::StoreError;
};

struct StoreClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  // How long connect() keeps retrying (with backoff) before it gives up.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  // Default limit for blocking operations (get of a missing key, wait).
  std::chrono::milliseconds op_timeout{std::chrono::seconds(60)};
  // The wire generation to speak. G2 (VALIDATE + PING, CANCEL_WAIT on a timed-out wait)
  // suits our server; G0 talks to PyTorch <= 2.0 servers (a timed-out wait then drops the
  // connection, and the next call reconnects, since G0 cannot cancel a wait).
  WireGeneration wire = WireGeneration::g2;
  // Longest value accepted in a reply; a longer length means a broken or hostile server.
  std::size_t max_reply_bytes = std::size_t{256} * 1024 * 1024;
  // How often an idempotent operation is retried over a fresh connection after the
  // connection broke (each reconnect backs off, bounded by connect_timeout).
  int max_retries = 3;
  // The job secret; set: right after the handshake the store proves it knows it, then the
  // client does (job_auth.hpp); a store that fails either throws StoreAuthRefused.
  std::string secret;
};

class StoreClient {
 public:
  virtual ~StoreClient() = default;

  // Connects, retrying with backoff until options.connect_timeout; throws StoreError.
  static std::unique_ptr<StoreClient> connect(const StoreClientOptions& options);

  virtual void set(std::string_view key, std::string_view value) = 0;
  // Blocks until the key exists (up to op_timeout); throws StoreTimeout.
  virtual std::string get(std::string_view key) = 0;
  virtual std::string get(std::string_view key, std::chrono::milliseconds timeout) = 0;
  // TCPStore semantics: returns the value now stored (desired if the swap happened).
  virtual std::string compare_set(std::string_view key, std::string_view expected,
                                  std::string_view desired) = 0;
  virtual int64_t add(std::string_view key, int64_t delta) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists; false when the timeout passed first.
  virtual bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  virtual bool delete_key(std::string_view key) = 0;
  virtual int64_t num_keys() = 0;
  virtual void append(std::string_view key, std::string_view value) = 0;
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys) = 0;
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::string>& values) = 0;
};

}  // namespace ddprun::rendezvous::store
