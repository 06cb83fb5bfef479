#pragma once
// Runs a command to completion with a deadline and captures what it prints. The Slurm tests
// drive the cluster through command-line clients (srun, sbatch, scontrol), so this is their
// only way to talk to it.

#include <chrono>
#include <string>
#include <vector>

namespace ddprun::slurm_test {

struct CommandResult {
  int exit_status = -1;  // the exit code, or 128+N when the command died of signal N
  bool timed_out = false;
  std::string output;  // stdout and stderr interleaved, as a user would see them
};

// Runs argv[0] (searched in PATH) with the given arguments. At the deadline the whole process
// group is killed with SIGKILL and timed_out is set. Output beyond 4 MiB is dropped, so a
// runaway command cannot exhaust the test's memory.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace ddprun::slurm_test
