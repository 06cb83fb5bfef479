// slurm/mingpt-requeue.sbatch: the SIGUSR1 that `--signal=B:USR1@N` sends before the time limit
// makes the trainers snapshot and stop (ddprun exits 143), the job requeues itself, and its
// second run resumes from the snapshot and finishes.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "slurm_cluster.hpp"
#include "training_job.hpp"
#include "wait_for_path.hpp"

using namespace std::chrono_literals;
using namespace ddprun::slurm_test;

namespace {

// Long enough (about 1-2 s an epoch here) that the signal lands mid-run, short enough that the
// second run finishes quickly.
constexpr int kEpochs = 6;

// A `scontrol show job -o` field, e.g. "Restarts".
std::string job_field(const SlurmCluster& cluster, const std::string& job, const std::string& key) {
  const auto shown = cluster.client({"scontrol", "show", "job", "-o", job}, 30s);
  const auto at = shown.output.find(" " + key + "=");
  if (at == std::string::npos) {
    return "";
  }
  const auto begin = at + key.size() + 2;
  return shown.output.substr(begin, shown.output.find_first_of(" \n", begin) - begin);
}

// Returns once the wall clock's whole second has moved past the one at the call (<= 1 s).
void wait_for_next_wall_clock_second() {
  using std::chrono::system_clock;
  const auto now = system_clock::now();
  std::this_thread::sleep_until(std::chrono::floor<std::chrono::seconds>(now) +
                                std::chrono::seconds(1));
}

}  // namespace

TEST_CASE("mingpt-requeue.sbatch: USR1 before the time limit snapshots, requeues, resumes") {
  SlurmCluster cluster;
  const auto dir = cluster.job_dir();
  const auto out = dir / "job.out";
  std::vector<std::string> args = {"--chdir",
                                   dir.string(),
                                   "-o",
                                   out.string(),
                                   export_ddprun(ddprun_binary(), ""),
                                   std::string(DDPRUN_SOURCE_DIR) + "/slurm/mingpt-requeue.sbatch"};
  for (auto& override_arg : tiny_training(dir, kEpochs, 60)) {
    args.push_back(override_arg);
  }
  const auto job = cluster.submit(args);
  const auto snapshot = dir / "snapshot.pt";
  const bool first_snapshot = wait_for_path(snapshot, 120s);
  INFO(read_file(out) << cluster.log_tail());
  REQUIRE(first_snapshot);

  // What Slurm does at the --signal time: SIGUSR1 to the batch shell only.
  REQUIRE(cluster.client({"scancel", "--batch", "--signal=USR1", job}, 30s).exit_status == 0);
  // The requeued job waits for its BeginTime (about 2 minutes); start it now instead.
  bool requeued = false;
  std::string state;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (!requeued && std::chrono::steady_clock::now() < deadline) {
    state = job_field(cluster, job, "JobState");
    requeued = job_field(cluster, job, "Restarts") == "1" && state == "PENDING";
    if (!requeued) {
      ::usleep(100'000);  // no event tells a client that a job was requeued
    }
  }
  INFO("job state " << state << "\n" << read_file(out));
  REQUIRE(requeued);
  // Slurm revokes a job's credential when it kills the job for the requeue, and slurmd refuses
  // a launch whose credential is not newer than the revocation, in whole seconds ("Job
  // credential revoked": the job ends FAILED with RunTime 00:00:00). Slurm's own requeue delay
  // (BeginTime) avoids that; starting the job at once must wait for the next second instead.
  // The kill came before the job turned PENDING, so that second is at most one away.
  wait_for_next_wall_clock_second();
  REQUIRE(
      cluster.client({"scontrol", "update", "JobId=" + job, "StartTime=now"}, 30s).exit_status ==
      0);

  const auto outcome = cluster.wait_for_job_end(job, 150s);
  const auto printed = read_file(out);
  INFO(printed << (outcome ? outcome->raw : "(job still running)"));
  REQUIRE(outcome);
  CHECK(outcome->state == "COMPLETED");
  CHECK_THAT(printed, Catch::Contains("SIGUSR1 received"));
  CHECK_THAT(printed, Catch::Contains("preempted: stopping after epoch"));
  CHECK_THAT(printed,
             Catch::Contains("stopped by SIGTERM (requested by this script: yes), requeueing"));
  CHECK_THAT(printed, Catch::Contains("run 2 on"));
  CHECK_THAT(printed, Catch::Contains("resumed from " + snapshot.string()));
  CHECK_THAT(printed, Catch::Contains("done: " + std::to_string(kEpochs) + " epochs"));
  CHECK_THAT(printed, Catch::Contains("mingpt-requeue: training finished"));
}
