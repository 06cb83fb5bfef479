#include "launcher/trainer_check.hpp"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "launcher/usage_error.hpp"

extern char** environ;

namespace ddprun::launcher {
namespace {

// ddprun-train's usage error: its configuration is invalid (main.cpp of worker-runtime).
constexpr int kTrainerUsageError = 2;

// Runs argv to its end, with this process's environment and standard streams; its wait status.
int run_to_end(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (error != 0) {
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw std::runtime_error("waiting for " + argv[0] + ": " + std::strerror(errno));
    }
  }
  return status;
}

}  // namespace

void check_trainer_config(const std::vector<std::string>& trainer_argv) {
  std::vector<std::string> argv{trainer_argv.front(), "--check-config"};
  argv.insert(argv.end(), trainer_argv.begin() + 1, trainer_argv.end());
  const int status = run_to_end(argv);
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
