// scancel of a running 2-node training job: SIGTERM reaches the trainers, which write a
// snapshot and exit; ddprun reports 143 (128+SIGTERM) and nothing is left running.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"
#include "started_training.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

TEST_CASE("scancel: the workers get SIGTERM, snapshot, and nothing is left running") {
  SlurmCluster cluster;
  const auto training = start_two_node_training(cluster, {}, 1000, 30);

  const auto before_cancel = std::filesystem::file_time_type::clock::now();
  const auto cancelled = cluster.client({"scancel", training.job}, 30s);
  REQUIRE(cancelled.exit_status == 0);
  const auto [outcome, tasks] = wait_for_training_end(cluster, training, "CANCELLED", 60s);
  INFO(tasks << outcome.raw);
  CHECK_THAT(tasks, Catch::Contains("preempted: stopping after epoch"));
  CHECK_THAT(tasks, Catch::Contains("ddprun on node1 exited 143"));
  CHECK_THAT(tasks, Catch::Contains("ddprun on node2 exited 143"));
  // The snapshot was rewritten after the SIGTERM, not only left from the last epoch.
  CHECK(std::filesystem::last_write_time(training.snapshot()) > before_cancel);

  // The job is over: within a few seconds only slurmd remains on each node.
  for (const char* node : {"node1", "node2"}) {
    auto left = cluster.node_pids(node);
    for (int i = 0; i < 50 && !left.empty(); ++i) {
      // slurmstepd ends shortly after its tasks; nothing to wait on from outside the node.
      ::usleep(100'000);
      left = cluster.node_pids(node);
    }
    INFO(node);
    CHECK(left.empty());
  }
}
