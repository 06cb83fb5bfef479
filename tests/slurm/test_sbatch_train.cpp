// slurm/mingpt.sbatch, as a user submits it, trains across the two nodes to the last epoch, in
// its zero-configuration form and in its explicit-flag form.

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"
#include "training_job.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

namespace {

constexpr int kEpochs = 2;

void train_with(const SlurmCluster& cluster, const std::string& form) {
  const auto dir = cluster.job_dir() / form;
  std::filesystem::create_directories(dir);
  const auto out = dir / "job.out";
  std::vector<std::string> args = {"--chdir",
                                   dir.string(),
                                   "-o",
                                   out.string(),
                                   export_ddprun(ddprun_binary(), "DDPRUN_FORM=" + form),
                                   std::string(DDPRUN_SOURCE_DIR) + "/slurm/mingpt.sbatch"};
  for (auto& override_arg : tiny_training(dir, kEpochs, 4)) {
    args.push_back(override_arg);
  }
  const auto job = cluster.submit(args);
  const auto outcome = cluster.wait_for_job_end(job, 150s);
  const auto printed = read_file(out);
  INFO("form " << form << "\n" << printed << (outcome ? outcome->raw : "(job still running)"));
  REQUIRE(outcome);
  CHECK(outcome->state == "COMPLETED");
  CHECK(outcome->exit_code == "0:0");
  CHECK(std::filesystem::exists(dir / "snapshot.pt"));
  // Both nodes ran a trainer of one 2-rank world, and it reached the last epoch.
  CHECK_THAT(printed, Catch::Contains("ddprun-train: 2 rank(s)"));
  CHECK_THAT(printed, Catch::Contains("done: " + std::to_string(kEpochs) + " epochs"));
}

}  // namespace

TEST_CASE("mingpt.sbatch trains across 2 nodes to the end") {
  SlurmCluster cluster;
  SECTION("zero-configuration form") {
    train_with(cluster, "zero-config");
  }
  SECTION("explicit-flag form") {
    train_with(cluster, "explicit");
  }
}
