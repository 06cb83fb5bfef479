#pragma once
// The per-node elastic agent: rendezvous with the other nodes, start and watch the workers,
// restart or re-form the job, and return the launcher's exit status.

#include "agent/base/agent_config.hpp"

namespace ddprun::agent {

// Runs the agent to completion. Returns the process exit status (0 success, 1 failure).
int run_agent(const AgentConfig& config);

}  // namespace ddprun::agent
