// In a `--nnodes 1:2` job, killing every process of one node mid-run leaves the other node
// training on, as a world of one, from the last snapshot to the last epoch.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"
#include "started_training.hpp"
#include "training_job.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

TEST_CASE("losing a node of a --nnodes 1:2 job: the other trains on from the last snapshot") {
  constexpr int kEpochs = 5;
  SlurmCluster cluster;
  const auto training = start_two_node_training(
      cluster,
      {"--nnodes", "1:2", "--max_restarts", "3", "--rdzv_conf",
       "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2"},
      kEpochs, 60);

  // Lose node2: SIGKILL to everything of the job there except Slurm's own slurmstepd.
  const auto stepd = std::filesystem::canonical("/usr/sbin/slurmstepd");
  int killed = 0;
  for (const int pid : cluster.node_pids("node2")) {
    if (exe_of(pid) != stepd && ::kill(pid, SIGKILL) == 0) {
      ++killed;
    }
  }
  REQUIRE(killed >= 2);  // at least the wrapper shell and ddprun

  const auto outcome = cluster.wait_for_job_end(training.job, 150s);
  const auto survivor = read_file(training.dir / "task-0.out");
  INFO(survivor << (outcome ? outcome->raw : "(job still running)"));
  REQUIRE(outcome);
  CHECK_THAT(survivor, Catch::Contains("ddprun on node1 exited 0"));
  // The survivor re-formed a world of one, resumed from the snapshot instead of starting over,
  // and finished the last epoch.
  CHECK_THAT(survivor, Catch::Contains("ddprun-train: 2 rank(s)"));
  CHECK_THAT(survivor, Catch::Contains("ddprun-train: 1 rank(s)"));
  CHECK_THAT(survivor,
             Catch::Contains("resumed from " + training.snapshot().string() + ": finished epoch"));
  CHECK_THAT(survivor, Catch::Contains("done: " + std::to_string(kEpochs) + " epochs"));
}
