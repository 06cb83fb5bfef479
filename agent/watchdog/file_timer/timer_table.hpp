#pragma once
// The timers of torchrun's file-timer server (FileTimerServer in PyTorch 2.13), as a pure state
// machine: requests and the time go in as values, the workers to act on come out. No clock, no
// I/O, no signals; the driver (FileTimerServer) owns those. Not thread-safe: one event loop.
//
// torchrun's rules, kept: timers are keyed by (pid, scope_id); an acquire replaces the timer of
// its key, a release deletes it; a timer is expired when expiration_time <= now; per worker
// the expired timers are taken in expiration order and the first with signal > 0 decides the
// signal (none: report only); every timer of a worker that had one expire is then cleared;
// timers of exited workers are dropped (PyTorch >= 2.3); a new worker group starts empty.
// Ours: requests from pids that are not current workers are refused (pids are reused, and a
// signal must never reach a process the agent did not start), and a worker holds at most
// kMaxTimersPerWorker timers.

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/watched_worker.hpp"
#include "agent/watchdog/file_timer/file_timer_request.hpp"

namespace ddprun::agent {

// Bounds the table when a worker invents scopes without releasing them (each `expires()` call
// site is one scope, so real programs hold a handful).
inline constexpr std::size_t kMaxTimersPerWorker = 1024;

struct TimerExpiry {
  WatchedWorker worker;
  std::string scope_id;            // the timer that decided the signal (else the earliest expired)
  double expiration_epoch_s = 0;   // that timer's expiration time
  int signal = 0;                  // <= 0: no expired timer asked for a kill; report only
  std::size_t expired_timers = 0;  // how many of the worker's timers had expired
};

class TimerTable {
 public:
  enum class Outcome {
    kAcquired,        // a timer set (or replaced)
    kReleased,        // a timer deleted
    kReleaseUnknown,  // release of a timer that does not exist (harmless: torchrun ignores it)
    kNotAWorker,      // the pid is not a current worker: ignored
    kTooManyTimers,   // the worker already holds kMaxTimersPerWorker timers: ignored
  };

  // A new worker group: forgets every timer and watches these workers only.
  void start_group(std::vector<WatchedWorker> workers);

  Outcome apply(const FileTimerRequest& request);

  // The worker exited: its timers can no longer fire, and its pid stops being trusted.
  void forget_worker(pid_t pid);

  // One entry per worker with a timer expired at now (expiration_time <= now), in rank order;
  // all timers of those workers are cleared, so each expiry is reported once.
  std::vector<TimerExpiry> take_expired(double now_epoch_s);

  // The earliest expiration time of any timer: when take_expired() next has work. nullopt: none.
  std::optional<double> next_deadline_epoch_s() const;

  std::size_t timer_count() const { return timers_.size(); }
  const std::vector<WatchedWorker>& workers() const { return workers_; }

 private:
  struct Timer {
    double expiration_epoch_s = 0;
    int signal = 0;
  };
  const WatchedWorker* find_worker(pid_t pid) const;
  std::size_t timers_of(pid_t pid) const;

  std::vector<WatchedWorker> workers_;
  std::map<std::pair<pid_t, std::string>, Timer> timers_;  // (pid, scope_id) -> timer
};

}  // namespace ddprun::agent
