#pragma once
// Starting one worker: fork/exec with the worker in its own session (so its process group can
// be signalled as a whole, grandchildren included) and PR_SET_PDEATHSIG(SIGKILL), so it dies
// with its agent even when the agent is SIGKILLed (torchrun leaves orphans). With
// --numa-binding the worker is bound to its CPUs before exec (what torchrun's `numactl
// --physcpubind` wrapper does, without needing numactl).

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/workers/worker_env.hpp"

namespace ddprun::agent {

struct WorkerCommand {
  std::vector<std::string> argv;
  EnvMap env;
  int stdout_fd = -1;  // dup'ed onto 1 in the child; -1 inherits the agent's
  int stderr_fd = -1;
  std::vector<int> cpu_affinity;  // logical CPUs the worker may run on; empty: the agent's
  int heartbeat_fd = -1;  // --watchdog-timeout: put at HeartbeatChannel::kWorkerFd; -1: none
};

// The program execve() runs: argv0 itself when it contains '/', else the first executable
// match in the PATH of env; argv0 unchanged when nothing matches (exec then reports it).
std::string resolve_program(const std::string& argv0, const EnvMap& env);

// Forks and execs. Must be called from the thread that lives as long as the agent: the
// kernel's "parent death" is the death of the forking thread. child_mask is restored in the
// child before exec. Returns the pid; throws std::runtime_error when fork fails. A failed
// exec (or CPU binding) makes the child print the reason on its stderr and exit 127.
pid_t spawn_worker(const WorkerCommand& command, const sigset_t& child_mask);

// Sends sig to the worker's process group (falls back to the pid if the group is gone or not
// formed yet). Returns false when neither exists any more.
bool signal_worker_group(pid_t pid, int sig);

}  // namespace ddprun::agent
