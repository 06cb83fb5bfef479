#pragma once
// The TCPStore-protocol server (both wire generations), embeddable in the agent and run
// standalone by ddprun-store. It owns its event-loop threads; destruction stops it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ddprun::rendezvous {

struct StoreLimits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys_per_request = 131072;
  std::size_t max_total_bytes = std::size_t{4} * 1024 * 1024 * 1024;  // memory budget
  std::size_t max_connections = 65536;
};

struct StoreServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 0;  // 0 picks a free port
  StoreLimits limits;
  int threads = 1;
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
};

}  // namespace ddprun::rendezvous
