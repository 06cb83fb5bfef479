#pragma once
// What a worker's wait status means, and the worker group's state derived from all of them.
// Pure, so the gang rules are unit-tested without processes.

#include <optional>
#include <string>
#include <vector>

#include "common/signals.hpp"

namespace ddprun::agent {

// torchrun's exit code convention: >= 0 the exit status, < 0 minus the signal number.
struct WorkerExit {
  int exit_code = 0;
  bool succeeded() const { return exit_code == 0; }
};

WorkerExit worker_exit_from_wait_status(int wait_status);

// "SIGKILL" for 9, "SIG42" for an unnamed number: glibc's names, as everywhere in ddprun.
using common::signal_name;

// torchrun's message for a worker without an error file.
std::string default_failure_message(const WorkerExit& exit, int pid);

enum class GroupState {
  kRunning,    // nobody failed and somebody still runs
  kSucceeded,  // every worker exited 0
  kFailed,     // at least one worker failed: the whole local group must stop (gang semantics)
};

// One entry per local rank: nullopt while that worker still runs.
GroupState group_state(const std::vector<std::optional<WorkerExit>>& exits);

}  // namespace ddprun::agent
