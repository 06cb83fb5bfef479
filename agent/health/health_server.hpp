#pragma once
// The agent's health-check server (TORCHELASTIC_HEALTH_CHECK_PORT): plain HTTP on its own
// thread and io_context, so that it answers while the agent's loop is stalled; that is the
// point of asking it. GET /health (or / or /healthz) answers 200 while the loop has made
// progress within stale_after, 503 once it has not, both with health_body's JSON; GET /metrics
// the same state in Prometheus' format; /job/ the job page and /job/api/state its JSON (with the
// job secret's token, job_page_access.hpp); another path 404, another method 405, junk 400. Each
// connection is bounded: a head of at most kMaxHeadBytes read within kReadLimit, one response, then
// the connection is closed. Construction binds (throws std::runtime_error naming the address);
// destruction stops the thread and joins it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "agent/health/health_board.hpp"
#include "common/seconds.hpp"

namespace ddprun::agent {

// Who may use the job page, and whether its stacks button works.
struct JobPageOptions {
  std::string token;    // job_page_token(secret); "" without a secret: the page is open
  bool stacks = false;  // with a secret always; without one only when asked for
};

class HealthServer {
 public:
  static constexpr std::size_t kMaxHeadBytes = 8 * 1024;
  static constexpr std::chrono::seconds kReadLimit{2};
  static constexpr std::size_t kMaxConnections = 32;

  // board must outlive the server.
  HealthServer(const std::string& host, uint16_t port, common::Seconds stale_after,
               HealthBoard& board, JobPageOptions page = {});
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
