#pragma once
// What the agent's loop tells its health-check server (health_server.hpp), across threads. The
// loop records progress on every turn it reports and publishes the round's state when it
// changes; the server reads both from its own thread. The server must answer while the loop is
// stalled, even one stopped while publishing, so progress is atomic and the state is read with
// try_lock: a busy lock leaves the server with the last state it read.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace ddprun::agent {

// The round as a health check shows it.
struct HealthState {
  std::optional<uint64_t> round;       // nothing before the first round forms
  int restarts = 0;                    // TORCHELASTIC_RESTART_COUNT of the running group
  std::map<int, std::string> workers;  // local rank -> running, succeeded, failed, stopped
};

class HealthBoard {
 public:
  using Clock = std::chrono::steady_clock;

  // The loop's side.
  void record_progress();
  void publish(HealthState state);  // records progress too

  // The server's side.
  Clock::time_point last_progress() const;
  int64_t last_progress_unix_s() const;
  // The latest state, or `fallback` when the loop holds the lock right now.
  HealthState state_or(const HealthState& fallback) const;

 private:
  std::atomic<Clock::rep> progress_ticks_{Clock::now().time_since_epoch().count()};
  std::atomic<int64_t> progress_unix_s_{0};
  mutable std::mutex mutex_;
  HealthState state_;
};

}  // namespace ddprun::agent
