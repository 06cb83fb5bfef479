#pragma once
// Zero-configuration under Slurm: a pure function from the environment srun gives a task to
// defaults for ddprun's options, and the checks that catch the classic torchrun-under-srun
// mistakes (several launchers per node, a rendezvous host outside the step, too few nodes).
// Explicit options and PET_* variables always win over these defaults.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/command_line.hpp"
#include "launcher/environment.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

inline constexpr int kSlurmRendezvousPort = 29400;  // c10d's default port

struct SlurmStep {
  std::vector<std::string> hosts;  // the step's nodes (the job's when srun gave no step list)
  std::string node_list_variable;  // SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or SLURM_NODELIST
  std::map<std::string, RawValue> defaults;  // by option dest; source "slurm:SLURM_X"
};

// The step ddprun runs in, when SLURM_JOB_ID and a node list are set; nothing otherwise.
// Throws UsageError naming the variable when its node list is malformed or empty.
std::optional<SlurmStep> read_slurm_step(const Environment& env);

// Warnings, each naming the fix, for a resolved configuration inside `step`.
std::vector<std::string> slurm_warnings(const SlurmStep& step, const Environment& env,
                                        const LaunchConfig& config);

// The largest count in a SLURM_TASKS_PER_NODE value such as "2(x3),1"; nothing if malformed.
std::optional<int> max_tasks_per_node(const std::string& tasks_per_node);

}  // namespace ddprun::launcher
