#pragma once
// The launcher's short-lived helpers before anything starts (`ddprun-train --check-config`, a pip
// installation's trainer builder): run one to its end, with this process's environment and
// stderr, so that what it says reaches the user as it happens.

#include <cstddef>
#include <string>
#include <vector>

namespace ddprun::launcher {

struct ChildResult {
  int wait_status = 0;  // as waitpid reports it
  std::string out;      // its stdout, when captured
};

// Runs argv (argv[0] looked up on PATH unless it holds a slash) to its end. With
// `stdout_limit` > 0 its stdout is captured, at most that many bytes kept; with 0 it is this
// process's. Throws std::runtime_error when it cannot be started or waited for.
ChildResult run_child(const std::vector<std::string>& argv, std::size_t stdout_limit = 0);

}  // namespace ddprun::launcher
