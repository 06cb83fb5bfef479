#pragma once
// The local worker group of one round: starts every worker with its streams wired as the log
// plan says (inherited, a file, /dev/null, or --tee'd through the agent), holds the pumps of
// the tee'd output, collects exits, and signals the workers (each worker's whole process
// group). It never waits: the agent's event loop reaps on SIGCHLD, pumps a pipe when it is
// readable, and times the SIGKILL after the shutdown timeout, and the wait for its reaping. A
// worker SIGKILL does not end within that wait is abandoned (agent/workers/stuck_workers.hpp):
// never signalled, waited for or reaped by the group again. The destructor kills what still runs
// and waits for it as long (blocking, but bounded), then abandons what is left.
//
// After signal_all, an exit is the stop's doing only when the stop's signal (or SIGKILL) ended
// the worker, or it exited 128 + that signal as a shell does; any other failure is the worker's
// own, reached before the stop did, and the failure table lists it.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/logs/console.hpp"
#include "agent/logs/log_layout.hpp"
#include "agent/logs/output_pump.hpp"
#include "agent/workers/stuck_workers.hpp"
#include "agent/workers/worker_env.hpp"
#include "agent/workers/worker_exit.hpp"
#include "agent/workers/worker_record.hpp"

namespace ddprun::agent {

struct WorkerLaunch {
  int local_rank = 0;
  int global_rank = 0;
  std::vector<std::string> argv;
  EnvMap env;
  WorkerLogPlan logs;
  std::string console_prefix;     // for --tee'd streams
  std::vector<int> cpu_affinity;  // --numa-binding: the worker's CPUs; empty: no binding
  int heartbeat_fd = -1;          // --watchdog-timeout: the write end of its heartbeat pipe
};

class WorkerGroup {
 public:
  using Clock = WorkerClock;

  // Starts every worker at once. Throws std::runtime_error (already started ones are killed).
  // child_mask: the signal mask workers start with (the agent's before it blocked the signals
  // its event loop reads). reap_after_kill_limit: how long a SIGKILLed worker may take to be
  // reaped before it counts as stuck.
  WorkerGroup(const std::vector<WorkerLaunch>& launches, const sigset_t& child_mask,
              Clock::duration reap_after_kill_limit);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Collects the exits of workers that ended (non-blocking; call on SIGCHLD). Reaps by pid
  // only, so the agent's other children (stack capture tools) are left to their owners. What
  // a reaped worker wrote last is copied from its tee'd pipes first, so its log file is whole
  // once its exit is known (a hang's faulthandler traceback is read from there).
  void reap();
  GroupState state() const;
  // Nothing left to wait for: every worker reaped, or abandoned as stuck after its SIGKILL.
  bool all_reaped_or_abandoned() const;
  const std::vector<WorkerRecord>& workers() const { return workers_; }
  // From the first worker's start to the last's.
  Clock::duration start_spread() const;
  // Whether a worker that still runs has a thread the kernel calls runnable (reads /proc).
  bool any_running_worker_runnable() const;

  // Live recovery kept the workers into a new round: global rank = base + local rank.
  void renumber(int base_global_rank);
  // Sends sig to every live worker's process group; exits by it from now on count as stopped by
  // the agent. Workers that had exited before the signal went out are not marked so.
  void signal_all(int sig);
  // SIGKILL to every worker's process group, exited ones too: grandchildren left behind go.
  // Abandoned workers are left alone. A running worker's first SIGKILL starts its reap wait.
  void kill_all();
  // When the next SIGKILLed worker becomes stuck (nullopt: none is waited for); the loop's timer.
  std::optional<Clock::time_point> next_stuck_deadline() const;
  // Gives up on the workers stuck at `now` (stuck_after_kill) and returns them, with their state.
  std::vector<AbandonedWorker> abandon_stuck(Clock::time_point now);

  // The console the tee'd streams write to; the run loop ends open lines through it before
  // printing a message of its own.
  Console& console() { return *console_; }
  // The pumps of the tee'd streams: wait on fd() while open(), then on_readable().
  std::vector<OutputPump>& output_pumps() { return pumps_; }

 private:
  void start_worker(const WorkerLaunch& launch, const sigset_t& child_mask);
  int duplicate_fd(const std::string& path);
  void finish_output_if_done();
  void kill_and_reap_bounded();
  bool ended_by_stop(const WorkerExit& exit) const;

  std::unique_ptr<Console> console_;  // before pumps_: the pumps write through it
  std::vector<std::pair<std::string, OwnedFd>> duplicate_files_;  // path, O_APPEND fd
  std::vector<WorkerRecord> workers_;
  std::vector<OutputPump> pumps_;
  std::vector<std::size_t> pump_worker_;  // per pump: its worker's index in workers_
  bool stopping_ = false;
  int stop_signal_ = SIGTERM;
  bool output_finished_ = false;
  Clock::duration reap_after_kill_limit_;
};

double unix_time_now();

// Reaps those of `pids` (the agent's own children, abandoned workers) that have exited, and
// drops them from the list; never blocks, reports nothing.
void reap_quietly(std::vector<pid_t>& pids);

}  // namespace ddprun::agent
