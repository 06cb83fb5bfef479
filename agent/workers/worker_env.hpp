#pragma once
// The worker environment contract: exactly the variables torchrun's LocalElasticAgent sets
// (reference torchrun.md section 2.1), computed without I/O so it can be unit-tested.

#include <map>
#include <string>

#include "agent/base/agent_config.hpp"
#include "agent/base/env_map.hpp"
#include "agent/base/round_types.hpp"

namespace ddprun::agent {

// Everything a worker's environment depends on besides the configuration and the round.
// For the bundled trainer's rank 0: where it also appends its metrics lines, for the job page.
inline constexpr const char* kAgentMetricsVariable = "DDPRUN_AGENT_METRICS";

struct WorkerEnvInputs {
  EnvMap inherited;  // the agent's own environment
  int local_rank = 0;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE; empty when file logging is disabled
};

// The complete environment of one worker: the inherited variables, the launcher's overrides,
// then torchrun's set on top (those always win, as in torchrun).
EnvMap build_worker_env(const WorkerSpec& workers, const NodeShape& shape, const RoundInfo& round,
                        const WorkerEnvInputs& inputs);

// Reads the process environment into a map (the one impure helper, kept apart).
EnvMap current_process_env();

}  // namespace ddprun::agent
