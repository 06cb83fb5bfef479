#pragma once
// From the launcher's resolved configuration to the agent's own (agent/base/agent_config.hpp): each
// component's part holds only what that component reads. Pure.

#include "agent/base/agent_config.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

agent::AgentConfig build_agent_config(const LaunchConfig& config);

}  // namespace ddprun::launcher
