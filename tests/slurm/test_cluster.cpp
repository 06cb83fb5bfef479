// The harness itself: a real 2-node Slurm cluster starts, runs srun and sbatch steps on
// distinct hosts, and leaves nothing behind when it stops.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "slurm_cluster.hpp"

using namespace std::chrono_literals;
using ddprun::slurm_test::read_file;
using ddprun::slurm_test::SlurmCluster;

TEST_CASE("srun and sbatch run on two nodes with their own hostnames and addresses") {
  std::string namespace_id;
  std::string slurmctld_pid;
  {
    SlurmCluster cluster;
    namespace_id = read_file(cluster.lab_dir() / "id");
    slurmctld_pid = read_file(cluster.lab_dir() / "run" / "slurmctld.pid");

    const auto hosts = cluster.client(
        {"srun", "-N2", "--ntasks-per-node=1", "-l", "bash", "-c",
         "echo $(hostname) $SLURMD_NODENAME $SLURM_NODEID $(hostname -I) $SLURM_JOB_NODELIST"},
        30s);
    INFO(hosts.output << cluster.log_tail());
    REQUIRE(hosts.exit_status == 0);
    CHECK_THAT(hosts.output, Catch::Contains("0: node1 node1 0 10.200.0.11 node[1-2]"));
    CHECK_THAT(hosts.output, Catch::Contains("1: node2 node2 1 10.200.0.12 node[1-2]"));

    const auto out = cluster.job_dir() / "batch.out";
    const auto job = cluster.submit(
        {"-N2", "--ntasks-per-node=1", "-o", out.string(), "--wrap",
         "echo batch on $(hostname); srun bash -c 'echo task $SLURM_PROCID on $(hostname)'"});
    const auto outcome = cluster.wait_for_job_end(job, 60s);
    INFO(read_file(out) << cluster.log_tail());
    REQUIRE(outcome);
    CHECK(outcome->state == "COMPLETED");
    CHECK(outcome->exit_code == "0:0");
    const auto printed = read_file(out);
    CHECK_THAT(printed, Catch::Contains("batch on node1"));
    CHECK_THAT(printed, Catch::Contains("task 0 on node1"));
    CHECK_THAT(printed, Catch::Contains("task 1 on node2"));

    // A step still running when the cluster stops must not survive it.
    REQUIRE(cluster.submit({"-N2", "--wrap", "srun sleep 300"}).size() > 0);
  }
  // Stopped: no namespace of ours, no controller.
  while (!namespace_id.empty() && namespace_id.back() == '\n') {
    namespace_id.pop_back();
  }
  REQUIRE_FALSE(namespace_id.empty());
  for (const char* name : {"-ctl", "-node1", "-node2"}) {
    CHECK_FALSE(std::filesystem::exists("/run/netns/" + namespace_id + name));
  }
  const int pid = std::stoi(slurmctld_pid);
  const auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  // Gone, or a zombie waiting for PID 1 to reap it.
  CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
}
