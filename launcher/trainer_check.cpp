#include "launcher/trainer_check.hpp"

#include <sys/wait.h>

#include <stdexcept>

#include "launcher/child_process.hpp"
#include "launcher/usage_error.hpp"

namespace ddprun::launcher {
namespace {

// ddprun-train's usage error: its configuration is invalid (main.cpp of worker-runtime).
constexpr int kTrainerUsageError = 2;

}  // namespace

void check_trainer_config(const std::vector<std::string>& trainer_argv) {
  std::vector<std::string> argv{trainer_argv.front(), "--check-config"};
  argv.insert(argv.end(), trainer_argv.begin() + 1, trainer_argv.end());
  const int status = run_child(argv).wait_status;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kTrainerUsageError) {
    throw UsageError("train", "the trainer's configuration is invalid (above); nothing was started",
                     "the values ddprun-train --help lists");
  }
  throw std::runtime_error(trainer_argv.front() + " --check-config " +
                           (WIFEXITED(status)
                                ? "exited " + std::to_string(WEXITSTATUS(status))
                                : "was killed by signal " + std::to_string(WTERMSIG(status))) +
                           "; nothing was started");
}

}  // namespace ddprun::launcher
