#pragma once
// The agent's health-check server (TORCHELASTIC_HEALTH_CHECK_PORT): plain HTTP on its own
// thread and io_context, so that it answers while the agent's loop is stalled; that is the
// point of asking it. GET (any path) answers 200 while the loop has made progress within
// stale_after, 503 once it has not, both with health_body's JSON; another method gets 405, junk
// 400. Each connection is bounded: a head of at most kMaxHeadBytes read within kReadLimit, one
// response, then the connection is closed. Construction binds (throws std::runtime_error
// naming the address); destruction stops the thread and joins it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "agent/health/health_board.hpp"
#include "common/seconds.hpp"

namespace ddprun::agent {

class HealthServer {
 public:
  static constexpr std::size_t kMaxHeadBytes = 8 * 1024;
  static constexpr std::chrono::seconds kReadLimit{2};
  static constexpr std::size_t kMaxConnections = 32;

  // board must outlive the server.
  HealthServer(const std::string& host, uint16_t port, common::Seconds stale_after,
               const HealthBoard& board);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  uint16_t port() const;

 private:
  struct Loop;  // the io_context, acceptor and connections: Asio stays out of this header
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace ddprun::agent
