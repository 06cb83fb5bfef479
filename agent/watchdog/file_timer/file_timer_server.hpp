#pragma once
// torchrun's file-timer server (TORCHELASTIC_ENABLE_FILE_TIMER=1) for an event loop: the FIFO,
// the request parser and the timer table of one worker group. It decides; the loop acts: it
// sends the signals, captures stacks, logs the warnings. No threads, no clock: the wall-clock
// time (epoch seconds, as FileTimerClient writes) is passed in.
//
// Lifetime: one per worker-group start, as torchrun rebuilds its server (fresh FIFO, no timers).
// Construct it before spawning the workers (their env carries path()), call watch() once their
// pids are known, destroy it after the group has stopped (the FIFO is unlinked then).
//
// Bad input: a malformed request is ignored; the first one per worker group produces one
// warning, later ones are only counted (torchrun logs a traceback per bad line and drops the
// good requests read in the same pass).
// The same holds for requests from pids that are not workers and for workers over the timer cap.
//
// One deliberate difference: after reaping a worker, torchrun 2.13's server also sends the same
// signal to its own agent process (with SIGKILL: no in-agent restart). ddprun's agent stops and
// restarts the group as for any failure instead.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/watched_worker.hpp"
#include "agent/watchdog/file_timer/file_timer_fifo.hpp"
#include "agent/watchdog/file_timer/timer_table.hpp"

namespace ddprun::agent {

class FileTimerServer {
 public:
  // Creates the FIFO (see FileTimerFifo). Throws std::runtime_error.
  explicit FileTimerServer(std::string path);

  // The workers of this group; requests from any other pid are ignored.
  void watch(std::vector<WatchedWorker> workers);
  // A worker exited: its timers are dropped (its pid may be reused).
  void forget_worker(pid_t pid);

  const std::string& path() const { return fifo_.path(); }
  int fd() const { return fifo_.fd(); }

  struct Events {
    std::vector<TimerExpiry> expired;   // act on these: signal > 0 means kill(pid, signal)
    std::vector<std::string> warnings;  // print these (at most one per kind per worker group)
  };
  // fd() is readable: reads and applies the requests, then reports what has expired at now
  // (a request can arrive already expired).
  Events on_readable(double now_epoch_s);
  // The deadline from next_deadline_epoch_s() passed: reports what has expired at now.
  Events on_deadline(double now_epoch_s);
  // When to call on_deadline() next (wall clock); nullopt: no timer is set.
  std::optional<double> next_deadline_epoch_s() const { return table_.next_deadline_epoch_s(); }

  struct Counters {
    std::size_t requests = 0;   // applied to the table, including ignored ones
    std::size_t malformed = 0;  // refused by the parser, or over-long
    std::size_t not_a_worker = 0;
    std::size_t over_timer_cap = 0;
  };
  const Counters& counters() const { return counters_; }

 private:
  void handle_line(const std::string& line, Events& events);
  void handle_request(const FileTimerRequest& request, Events& events);
  void note_malformed(const std::string& reason, Events& events);

  FileTimerFifo fifo_;
  TimerTable table_;
  Counters counters_;
  bool warned_malformed_ = false;
  bool warned_not_a_worker_ = false;
  bool warned_over_cap_ = false;
};

}  // namespace ddprun::agent
