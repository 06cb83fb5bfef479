// Under `srun`, ddprun's resolved configuration comes from the Slurm step, on every node, and
// --print-config says so.

#include <catch2/catch.hpp>

#include "slurm_cluster.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

TEST_CASE("srun ddprun --print-config shows the values Slurm gave, per node") {
  SlurmCluster cluster;
  const auto shown = cluster.client({"srun", "-N2", "--ntasks-per-node=1", "-l",
                                     ddprun_binary().string(), "--print-config", "train"},
                                    30s);
  INFO(shown.output);
  REQUIRE(shown.exit_status == 0);
  for (const char* task : {"0: ", "1: "}) {
    const std::string prefix = task;
    CHECK_THAT(shown.output, Catch::Contains(prefix + "  \"rdzv_backend\": \"c10d\""));
    CHECK_THAT(shown.output, Catch::Contains(prefix + "  \"rdzv_endpoint\": \"node1:29400\""));
    CHECK_THAT(shown.output, Catch::Contains(prefix + "  \"max_nodes\": 2"));
    CHECK_THAT(shown.output, Catch::Contains(prefix + "    \"node_rank\": \"slurm:SLURM_NODEID\""));
  }
  CHECK_THAT(shown.output, Catch::Contains("0:   \"local_addr\": \"node1\""));
  CHECK_THAT(shown.output, Catch::Contains("1:   \"local_addr\": \"node2\""));
  CHECK_THAT(shown.output, Catch::Contains("0:   \"node_rank_hint\": 0"));
  CHECK_THAT(shown.output, Catch::Contains("1:   \"node_rank_hint\": 1"));
}
