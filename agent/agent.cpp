#include "agent/agent.hpp"

#include <cstdio>

namespace ddprun::agent {

int run_agent(const launcher::LaunchConfig& /*config*/) {
  std::fprintf(stderr, "ddprun: the agent is not implemented yet\n");
  return 1;
}

}  // namespace ddprun::agent
