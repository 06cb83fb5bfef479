#pragma once
// The node checks' facts and in-process checks, read from the system: the GPU facts
// plan_node_checks needs, and whether a folder takes a file and has room. Small and impure on
// purpose, so the planner stays pure.

#include <cstdint>
#include <optional>
#include <string>

#include "agent/node_check/node_check_plan.hpp"
#include "agent/workers/worker_env.hpp"

namespace ddprun::agent {

// /dev/nvidiactl and /dev/nvidiaN, the device lists in env, nvidia-smi on env's PATH.
GpuFacts probe_gpu_facts(const EnvMap& env);

// Creates and removes a file in folder (creating the folder first, as the agent and the trainer
// would), then checks that min_free_bytes are free there. nullopt when it passes, else why not.
std::optional<std::string> folder_problem(const std::string& folder, std::uint64_t min_free_bytes);

}  // namespace ddprun::agent
