// A hung trainer under `srun ddprun --watchdog-timeout`: the agent of its node notices the
// silence, captures the stacks (node1 its own too), kills it, and the job restarts inside the
// allocation and resumes from its snapshot, instead of waiting out Gloo's 30-minute collective
// timeout.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"
#include "started_training.hpp"
#include "training_job.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

TEST_CASE("a hung trainer under srun ddprun --watchdog-timeout restarts inside the allocation") {
  SlurmCluster cluster;
  constexpr int kEpochs = 3;
  const auto training = start_two_node_training(
      cluster, {"--watchdog-timeout", "3", "--max_restarts", "1"}, kEpochs, 60);

  // Hang node2's trainer: stopped, it neither beats nor answers its peer's collectives.
  const auto trainer = ddprun_binary().parent_path() / "ddprun-train";
  int stopped = 0;
  for (const int pid : cluster.node_pids("node2")) {
    if (exe_of(pid) == trainer && ::kill(pid, SIGSTOP) == 0) {
      ++stopped;
    }
  }
  REQUIRE(stopped == 1);

  const auto [outcome, tasks] = wait_for_training_end(cluster, training, "COMPLETED", 150s);
  INFO(tasks << outcome.raw);
  CHECK_THAT(tasks, Catch::Contains("hung: no heartbeat"));
  CHECK_THAT(tasks, Catch::Contains("stacks: "));
  // Both ranks' stacks were captured before the kill: node1's trainer, blocked in a collective
  // with the hung one, either for node2's hang or, when its own heartbeat timeout ran out in the
  // same moment, as hung itself.
  const auto count = [&](const std::string& needle) {
    int found = 0;
    for (auto at = tasks.find(needle); at != std::string::npos; at = tasks.find(needle, at + 1)) {
      ++found;
    }
    return found;
  };
  CHECK(count(") hung: no heartbeat") +
            count("a worker hung on another node; this node's stacks: /") >=
        2);
  CHECK_THAT(tasks, Catch::Contains("restarting the worker group"));
  CHECK_THAT(tasks,
             Catch::Contains("resumed from " + training.snapshot().string() + ": finished epoch"));
  CHECK_THAT(tasks, Catch::Contains("done: " + std::to_string(kEpochs) + " epochs"));
  CHECK_THAT(tasks, Catch::Contains("ddprun on node1 exited 0"));
  CHECK_THAT(tasks, Catch::Contains("ddprun on node2 exited 0"));
}
