// `srun -N2 --ntasks-per-node=1 ddprun train` needs no flags: ddprun takes the rendezvous,
// node count and ranks from the Slurm step.

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"
#include "training_job.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

TEST_CASE("srun -N2 --ntasks-per-node=1 ddprun train works with no flags") {
  SlurmCluster cluster;
  const auto dir = cluster.job_dir();
  std::vector<std::string> args = {"srun",    "-N2",        "--ntasks-per-node=1",
                                   "--chdir", dir.string(), ddprun_binary().string(),
                                   "train"};
  for (auto& override_arg : tiny_training(dir, 2, 4)) {
    args.push_back(override_arg);
  }
  const auto trained = cluster.client(args, 150s);
  INFO(trained.output);
  REQUIRE_FALSE(trained.timed_out);
  CHECK(trained.exit_status == 0);
  CHECK(std::filesystem::exists(dir / "snapshot.pt"));
  CHECK_THAT(trained.output, Catch::Contains("ddprun-train: 2 rank(s)"));
  CHECK_THAT(trained.output, Catch::Contains("done: 2 epochs"));
}
