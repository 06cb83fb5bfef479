#pragma once
// The local worker group of one round: starts every worker, pumps their output, observes
// their exits through the signal channel's SIGCHLD, and stops them (the signal to each
// process group, SIGKILL after the shutdown timeout). The destructor kills what still runs.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

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
  WorkerGroup(const std::vector<WorkerLaunch>& launches, SignalChannel& signals);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  struct Wakeup {
    std::vector<int> signals;     // handled signals that arrived (not SIGCHLD)
    bool external_ready = false;  // external_fd became readable
  };
  // Blocks until a worker exits, a handled signal arrives, external_fd is readable or
  // timeout passes (nullopt: no timeout), pumping output meanwhile.
  Wakeup wait(int external_fd, std::optional<std::chrono::milliseconds> timeout);

  GroupState state() const;
  bool all_exited() const;
  const std::vector<WorkerRecord>& workers() const { return workers_; }

  // Sends sig to every live worker's group, waits up to timeout for them to exit, then
  // SIGKILLs the rest and waits (bounded) for them. Handled signals arriving meanwhile are
  // returned so the caller can still act on them.
  std::vector<int> stop(int sig, std::chrono::duration<double> timeout);

 private:
  void reap();
  void finish_output_if_done();
  void kill_and_reap_bounded();

  SignalChannel& signals_;
  std::vector<WorkerRecord> workers_;
  std::vector<OutputPump> pumps_;
  bool stopping_ = false;
  bool output_finished_ = false;
};

double unix_time_now();

}  // namespace ddprun::agent
