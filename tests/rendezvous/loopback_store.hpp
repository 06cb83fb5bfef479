#pragma once
// The store tests' two ends on 127.0.0.1: a quiet StoreServer on a free port, and the tests'
// blocking client of it, each with the job secret or none.

#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/store/store_server.hpp"
#include "tests/rendezvous/store_client.hpp"

namespace ddprun::rendezvous::store::testing {

inline std::unique_ptr<StoreServer> start_loopback_store(const std::string& secret = {},
                                                         const StoreLimits& limits = {}) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.limits = limits;
  options.log_level = StoreLogLevel::quiet;
  options.secret = secret;
  return StoreServer::start(options);
}

// connect_timeout bounds the connect and the handshake; op_timeout each blocking op.
inline std::unique_ptr<StoreClient> loopback_client(
    uint16_t port, const std::string& secret = {},
    std::chrono::milliseconds connect_timeout = std::chrono::seconds(10),
    std::chrono::milliseconds op_timeout = std::chrono::seconds(10)) {
  StoreClientOptions options;
  options.port = port;
  options.connect_timeout = connect_timeout;
  options.op_timeout = op_timeout;
  options.secret = secret;
  return StoreClient::connect(options);
}

}  // namespace ddprun::rendezvous::store::testing
