#include "agent/workers/worker_exit.hpp"

#include <sys/wait.h>

#include <cstring>

namespace ddprun::agent {

WorkerExit worker_exit_from_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status))
    return WorkerExit{-WTERMSIG(wait_status)};
  if (WIFEXITED(wait_status))
    return WorkerExit{WEXITSTATUS(wait_status)};
  return WorkerExit{1};  // stopped/continued are never reported: waitpid runs without WUNTRACED
}

std::string default_failure_message(const WorkerExit& exit, int pid) {
  if (exit.exit_code < 0) {
    const int sig = -exit.exit_code;
    return "Signal " + std::to_string(sig) + " (" + signal_name(sig) + ") received by PID " +
           std::to_string(pid);
  }
  return "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";
}

GroupState group_state(const std::vector<std::optional<WorkerExit>>& exits) {
  bool all_done = true;
  for (const auto& exit : exits) {
    if (!exit) {
      all_done = false;
    } else if (!exit->succeeded()) {
      return GroupState::kFailed;
    }
  }
  return all_done ? GroupState::kSucceeded : GroupState::kRunning;
}

}  // namespace ddprun::agent
