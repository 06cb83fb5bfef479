#pragma once
// The TCPStore-protocol server (both wire generations), embeddable in the agent and run
// standalone by ddprun-store. It owns its event-loop threads; destruction stops it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/store/store_limits.hpp"
#include "rendezvous/store/store_log.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::store {

struct StoreServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 0;  // 0 picks a free port
  StoreLimits limits;
  // What a connection that does not open with VALIDATE speaks: G0 (PyTorch <= 2.0, the
  // default) or G1 (2.1). Their opcodes clash, so this cannot be detected from the bytes.
  WireGeneration legacy_generation = WireGeneration::g0;
  StoreLogLevel log_level = StoreLogLevel::warning;
  // The job secret (job_auth.hpp). Set: the agents' keys (under "ddprun/") are served only to
  // connections that proved they know it; PyTorch's clients (their keys are never there) need
  // nothing. Empty: every connection is served, as PyTorch's store does.
  // With a secret, strangers cannot starve the agents: a connection must prove the secret or
  // make a request within 5 s of connecting (an agent that asked for a challenge may send only
  // PING and its proof until then); connections that have done neither are capped (a new one
  // closes the oldest), so are clients without the proof, and those share a budget of their
  // own (limits.max_open_bytes) for their buffers and every key outside the agents'. The caps
  // are at most a quarter (opening) and a half (clients without the proof) of the descriptor
  // limit and of max_connections.
  std::string secret;
};

class StoreServer {
 public:
  virtual ~StoreServer() = default;
  // Binds and starts serving in background threads; throws std::runtime_error naming the
  // address when it cannot bind.
  static std::unique_ptr<StoreServer> start(const StoreServerOptions& options);
  virtual uint16_t port() const = 0;
  virtual std::string host() const = 0;
  virtual void stop() = 0;  // idempotent
  // Connections open now (a snapshot, for diagnostics and tests).
  virtual std::size_t connection_count() const = 0;
  // Bytes charged to the memory budget now (a snapshot).
  virtual std::size_t memory_used() const = 0;
};

}  // namespace ddprun::rendezvous::store
