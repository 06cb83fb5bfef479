#pragma once
// The local worker group of one round: starts every worker, holds the pipes of their copied
// output, collects their exits, and signals them (each worker's whole process group). It does
// not wait: the agent's event loop reaps on SIGCHLD, pumps output when a pipe is readable, and
// times the SIGKILL after the shutdown timeout. The destructor kills what still runs.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/log_layout.hpp"
#include "agent/output_pump.hpp"
#include <signal.h>
#include "agent/worker_env.hpp"
#include "agent/worker_exit.hpp"

namespace ddprun::agent {

struct WorkerLaunch {
  int local_rank = 0;
  int global_rank = 0;
  std::vector<std::string> argv;
  EnvMap env;
  WorkerLogPlan logs;
  std::string console_prefix;
};

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
  // child_mask: the signal mask each worker starts with (the agent's mask before it blocked
  // the signals it reads through its signal channel).
  WorkerGroup(const std::vector<WorkerLaunch>& launches, const sigset_t& child_mask);
  // Kills and reaps (bounded) whatever still runs.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Collects the exits of workers that ended (non-blocking; call on SIGCHLD). Reaps by pid
  // only, so other children of the agent (stack capture tools) are left to their owners.
  void reap();
  GroupState state() const;
  bool all_exited() const;
  const std::vector<WorkerRecord>& workers() const { return workers_; }

  // Sends sig to every live worker's process group; from now on exits count as stopped by
  // the agent, not as failures.
  void signal_all(int sig);
  // SIGKILL to every worker's process group, exited ones too: grandchildren left behind go.
  void kill_all();

  // The pipes through which the agent copies worker output (--tee, prefixes); wait for their
  // fds to be readable and call on_readable().
  std::vector<OutputPump>& pumps() { return pumps_; }
  // Every worker exited: copies what is left in the pipes and flushes partial lines.
  void finish_output();

 private:
  void kill_and_reap_bounded();

  std::vector<WorkerRecord> workers_;
  std::vector<OutputPump> pumps_;
  bool stopping_ = false;
  bool output_finished_ = false;
};

double unix_time_now();

}  // namespace ddprun::agent
