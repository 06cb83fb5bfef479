// slurm/mingpt-etcd.sbatch, as a user submits it: it starts etcd inside the allocation (one
// member on a 2-node job), runs `srun ddprun --rdzv_backend etcd`, trains across both nodes to
// the last epoch, and stops its etcd member afterwards.

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"
#include "training_job.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

TEST_CASE("mingpt-etcd.sbatch trains across 2 nodes on an etcd it starts") {
  SlurmCluster cluster;
  const auto dir = cluster.job_dir();
  const auto out = dir / "job.out";
  std::vector<std::string> args = {
      "-N2",
      "--chdir",
      dir.string(),
      "-o",
      out.string(),
      export_ddprun(ddprun_binary(), "DDPRUN_ETCD_DATA=" + dir.string()),
      std::string(DDPRUN_SOURCE_DIR) + "/slurm/mingpt-etcd.sbatch"};
  for (auto& override_arg : tiny_training(dir, 2, 4)) {
    args.push_back(override_arg);
  }
  const auto job = cluster.submit(args);
  const auto outcome = cluster.wait_for_job_end(job, 150s);
  const auto printed = read_file(out);
  INFO(printed << (outcome ? outcome->raw : "(job still running)") << cluster.log_tail());
  REQUIRE(outcome);
  CHECK(outcome->state == "COMPLETED");
  CHECK(outcome->exit_code == "0:0");
  CHECK_THAT(printed, Catch::Contains("mingpt-etcd: started etcd on node1"));
  CHECK_THAT(printed, Catch::Contains("ddprun-train: 2 rank(s)"));
  CHECK_THAT(printed, Catch::Contains("done: 2 epochs"));
}
