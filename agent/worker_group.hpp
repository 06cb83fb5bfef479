#pragma once
// The local worker group of one round: starts every worker with its streams wired as the log
// plan says (inherited, a file, /dev/null, or --tee'd through the agent), pumps the tee'd
// output, observes exits through the signal channel's SIGCHLD, and stops the workers (the
// signal to each process group, SIGKILL after the shutdown timeout). The destructor kills what
// still runs.
//
// Failures are gathered as torchrun's monitor loop does: once a worker fails, the others that
// fail within the failure window (torchrun: one --monitor-interval) are failures too, rather
// than workers the agent stopped, so the failure table lists them all.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/console.hpp"
#include "agent/log_layout.hpp"
#include "agent/output_pump.hpp"
#include "agent/signal_channel.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_exit.hpp"

namespace ddprun::agent {

struct WorkerLaunch {
  int local_rank = 0;
  int global_rank = 0;
  std::vector<std::string> argv;
  EnvMap env;
  WorkerLogPlan logs;
  std::string console_prefix;     // for --tee'd streams
  std::vector<int> cpu_affinity;  // --numa-binding: the worker's CPUs; empty: no binding
};

// torchrun's default --monitor-interval: how long the group keeps collecting failures after the
// first one before wait() returns it.
inline constexpr std::chrono::milliseconds kDefaultFailureWindow{100};

struct WorkerRecord {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  std::string error_file;
  std::optional<WorkerExit> exit;  // set once reaped
  double exit_time_s = 0;          // unix seconds when the exit was observed
  bool stopped_by_agent = false;   // exited after the agent began stopping the group
};

class WorkerGroup {
 public:
  // Starts every worker at once. Throws std::runtime_error (already started ones are killed).
  // failure_window: the run loop passes --monitor-interval.
  WorkerGroup(const std::vector<WorkerLaunch>& launches, SignalChannel& signals,
              std::chrono::duration<double> failure_window = kDefaultFailureWindow);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  struct Wakeup {
    std::vector<int> signals;     // handled signals that arrived (not SIGCHLD)
    bool external_ready = false;  // external_fd became readable
  };
  // Blocks until a worker exits, a handled signal arrives, external_fd is readable or
  // timeout passes (nullopt: no timeout), pumping output meanwhile. When a worker has failed,
  // returns only once the failure window has passed, every worker has exited, or a handled
  // signal arrived, so that failures of the same moment are all recorded as failures.
  Wakeup wait(int external_fd, std::optional<std::chrono::milliseconds> timeout);

  GroupState state() const;
  bool all_exited() const;
  const std::vector<WorkerRecord>& workers() const { return workers_; }

  // Sends sig to every live worker's group, waits up to timeout for them to exit, then
  // SIGKILLs the rest and waits (bounded) for them. Handled signals arriving meanwhile are
  // returned so the caller can still act on them. Workers that had exited before the signal
  // went out are not marked stopped_by_agent.
  std::vector<int> stop(int sig, std::chrono::duration<double> timeout);

  // The console the tee'd streams write to; the run loop ends open lines through it before
  // printing a message of its own.
  Console& console() { return *console_; }

  // For a run loop that waits itself (an event loop) instead of calling wait(): the pumps of
  // the tee'd streams (wait on fd() while open(), then on_readable()); reap() after SIGCHLD;
  // and while gathering_failures(), keep reaping until failure_window_end() before acting on
  // a failed state.
  using Clock = std::chrono::steady_clock;
  std::vector<OutputPump>& output_pumps() { return pumps_; }
  void reap();
  bool gathering_failures() const;
  std::optional<Clock::time_point> failure_window_end() const { return failure_window_end_; }

 private:
  void start_worker(const WorkerLaunch& launch);
  int duplicate_fd(const std::string& path);
  void finish_output_if_done();
  void kill_and_reap_bounded();

  SignalChannel& signals_;
  Clock::duration failure_window_;
  std::unique_ptr<Console> console_;  // before pumps_: the pumps write through it
  std::vector<std::pair<std::string, OwnedFd>> duplicate_files_;  // path, O_APPEND fd
  std::vector<WorkerRecord> workers_;
  std::vector<OutputPump> pumps_;
  std::optional<Clock::time_point> failure_window_end_;  // set at the first failure
  bool stopping_ = false;
  bool output_finished_ = false;
};

double unix_time_now();

}  // namespace ddprun::agent
