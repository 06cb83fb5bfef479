#pragma once
// ddprun's progress watchdog (--watchdog-timeout SECONDS) as a pure state machine: heartbeats
// and the time go in as values, the hung workers come out. No clock, no I/O; HeartbeatChannel
// carries the beats and the agent's loop drives this. Not thread-safe: one event loop.
//
// Opt-in per worker: a worker is armed by its first heartbeat, so a program that never beats
// (one that does not know the channel) is never called hung. Once armed, a worker is hung
// when it has been silent for the whole timeout (now >= last beat + timeout); it is reported
// once, and a later heartbeat re-arms it.

#include <chrono>
#include <optional>
#include <vector>

#include "agent/base/watched_worker.hpp"

namespace ddprun::agent {

struct HungWorker {
  WatchedWorker worker;
  std::chrono::milliseconds silent_for{0};  // since its last heartbeat
};

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  // timeout must be positive (throws std::invalid_argument otherwise).
  explicit ProgressWatch(std::chrono::milliseconds timeout);

  // A new worker group: every worker unarmed.
  void start_group(const std::vector<WatchedWorker>& workers);
  // A heartbeat from the worker with this local rank (unknown ranks are ignored).
  void on_heartbeat(int local_rank, TimePoint now);
  // The worker exited: it can no longer hang.
  void forget_worker(int local_rank);

  // Armed workers silent for the whole timeout at now, in rank order; each reported once.
  std::vector<HungWorker> take_hung(TimePoint now);
  // When take_hung() next has work: the earliest (last beat + timeout) of armed, unreported
  // workers. nullopt: nobody is armed.
  std::optional<TimePoint> next_deadline() const;

  std::chrono::milliseconds timeout() const { return timeout_; }
  bool armed(int local_rank) const;

 private:
  struct Entry {
    WatchedWorker worker;
    std::optional<TimePoint> last_beat;  // nullopt: never beat (unarmed)
    bool reported = false;               // hung and reported since its last beat
  };
  Entry* find(int local_rank);
  const Entry* find(int local_rank) const;

  std::chrono::milliseconds timeout_;
  std::vector<Entry> entries_;
};

}  // namespace ddprun::agent
