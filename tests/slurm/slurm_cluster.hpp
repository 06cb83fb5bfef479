#pragma once
// A real Slurm cluster for one test: slurmctld and two slurmd, each in its own network
// namespace (tests/slurm/cluster.sh does the work). Started by the constructor, stopped by the
// destructor; if the test process dies instead, cluster.sh's watchdog stops it.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace ddprun::slurm_test {

// Where a batch job ended, from `scontrol show job` (there is no accounting database).
struct JobOutcome {
  std::string state;      // COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
  std::string exit_code;  // Slurm's "status:signal", e.g. "0:0", "143:0", "0:15"
  std::string raw;        // the whole `scontrol show job -o` line, for messages
};

class SlurmCluster {
 public:
  SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
  ~SlurmCluster();

  // A Slurm client command (srun, sbatch, scancel, ...) run where the controller lives.
  CommandResult client(const std::vector<std::string>& args,
                       std::chrono::milliseconds timeout) const;
  // A command run inside one compute node ("node1", "node2").
  CommandResult on_node(const std::string& node, const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout) const;
  // Processes alive in a node other than its slurmd: slurmstepd and the job's tasks.
  std::vector<int> node_pids(const std::string& node) const;

  // sbatch ARGS; returns the job id. Throws with sbatch's output when it is refused.
  std::string submit(const std::vector<std::string>& sbatch_args) const;
  // The job's state once it is no longer pending or running; nullopt at the deadline.
  std::optional<JobOutcome> wait_for_job_end(const std::string& job_id,
                                             std::chrono::milliseconds timeout) const;
  // The job's JobState right now (PENDING, RUNNING, ...), empty when Slurm forgot it.
  std::string job_state(const std::string& job_id) const;

  // The cluster's folder, shared by every node (same filesystem): jobs work in job_dir().
  const std::filesystem::path& lab_dir() const { return lab_dir_; }
  std::filesystem::path job_dir() const { return lab_dir_ / "job"; }
  // The last lines of every daemon log, for failure messages.
  std::string log_tail() const;

 private:
  std::filesystem::path script_;
  std::filesystem::path lab_dir_;
};

// The ddprun executable of this build, and a file's contents ("" when absent).
std::filesystem::path ddprun_binary();
std::string read_file(const std::filesystem::path& path);

}  // namespace ddprun::slurm_test
