#pragma once
// How the fault tests begin: a 2-node job, one task per node, each `ddprun <options> train` on
// the tiny model (training_job.hpp) under srun, already past its first snapshot, so the fault
// that follows has something to resume from; and how they wait for its end.

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "slurm_cluster.hpp"
#include "training_job.hpp"
#include "wait_for_path.hpp"

namespace ddprun::slurm_test {

// A job that start_two_node_training() started, and the folder it works in (the cluster's
// job_dir()): each task's output in task-<task id>.out, the trainer's snapshot in snapshot.pt.
struct StartedTraining {
  std::string job;
  std::filesystem::path dir;

  std::filesystem::path snapshot() const { return dir / "snapshot.pt"; }
  // Both tasks' output, task 0's first.
  std::string tasks_output() const {
    return read_file(dir / "task-0.out") + read_file(dir / "task-1.out");
  }
};

// Returns once the job's first snapshot exists; fails the test (with both tasks' output and the
// cluster's log) when it does not appear within two minutes.
inline StartedTraining start_two_node_training(const SlurmCluster& cluster,
                                               const std::vector<std::string>& options,
                                               int max_epochs, int steps_per_epoch) {
  const auto dir = cluster.job_dir();
  std::vector<std::string> command = {ddprun_binary().string()};
  command.insert(command.end(), options.begin(), options.end());
  command.push_back("train");
  for (auto& override_arg : tiny_training(dir, max_epochs, steps_per_epoch)) {
    command.push_back(override_arg);
  }
  // One OpenMP thread per trainer: two trainers of two spinning threads each on the machine's
  // two shared cores stretched a step past a 3 s watchdog timeout under load.
  const auto job =
      cluster.submit({"-N2", "--ntasks-per-node=1", "--export=ALL,OMP_NUM_THREADS=1", "--chdir",
                      dir.string(), "-o",
                      (dir / "job.out").string(), write_batch_script(dir, command).string()});
  StartedTraining training{.job = job, .dir = dir};
  const bool first_snapshot = wait_for_path(training.snapshot(), std::chrono::seconds(120));
  INFO(training.tasks_output() << cluster.log_tail());
  REQUIRE(first_snapshot);
  return training;
}

// How a job of start_two_node_training() ended: Slurm's outcome and both tasks' output.
struct EndedTraining {
  JobOutcome outcome;
  std::string tasks;
};

// Waits up to `timeout` for the job to end and checks that Slurm ended it in `expected_state`
// (COMPLETED, CANCELLED, ...); fails the test, with both tasks' output, when it is still running
// by then.
inline EndedTraining wait_for_training_end(const SlurmCluster& cluster,
                                           const StartedTraining& training,
                                           const std::string& expected_state,
                                           std::chrono::milliseconds timeout) {
  const auto outcome = cluster.wait_for_job_end(training.job, timeout);
  const auto tasks = training.tasks_output();
  INFO(tasks << (outcome ? outcome->raw : "(job still running)"));
  REQUIRE(outcome);
  CHECK(outcome->state == expected_state);
  return {*outcome, tasks};
}

}  // namespace ddprun::slurm_test
