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
  const auto metrics = read_file(dir / "metrics.jsonl");
  INFO(trained.output << "\n" << metrics);
  REQUIRE_FALSE(trained.timed_out);
  CHECK(trained.exit_status == 0);
  CHECK(std::filesystem::exists(dir / "snapshot.pt"));
  CHECK_THAT(metrics, Catch::Contains("\"world_size\":2"));
  CHECK_THAT(metrics, Catch::Contains("\"epoch\":2"));
}
