#pragma once
// How the fault tests begin: a 2-node job, one task per node, each `ddprun <options> train` on
// the tiny model (training_job.hpp) under srun, already past its first snapshot, so the fault
// that follows has something to resume from.

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "slurm_cluster.hpp"
#include "training_job.hpp"
#include "wait_for_path.hpp"

namespace ddprun::slurm_test {

// Returns the job id once <dir>/snapshot.pt exists; fails the test (with both tasks' output and
// the cluster's log) when it does not appear within two minutes.
inline std::string start_two_node_training(const SlurmCluster& cluster,
                                           const std::filesystem::path& dir,
                                           const std::vector<std::string>& options, int max_epochs,
                                           int steps_per_epoch) {
  std::vector<std::string> command = {ddprun_binary().string()};
  command.insert(command.end(), options.begin(), options.end());
  command.push_back("train");
  for (auto& override_arg : tiny_training(dir, max_epochs, steps_per_epoch)) {
    command.push_back(override_arg);
  }
  const auto job =
      cluster.submit({"-N2", "--ntasks-per-node=1", "--chdir", dir.string(), "-o",
                      (dir / "job.out").string(), write_batch_script(dir, command).string()});
  const bool first_snapshot = wait_for_path(dir / "snapshot.pt", std::chrono::seconds(120));
  INFO(read_file(dir / "task-0.out") << read_file(dir / "task-1.out") << cluster.log_tail());
  REQUIRE(first_snapshot);
  return job;
}

}  // namespace ddprun::slurm_test
