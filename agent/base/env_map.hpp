#pragma once
// An environment as the agent handles it: its own, a worker's, a tool's.

#include <map>
#include <string>

namespace ddprun::agent {

using EnvMap = std::map<std::string, std::string>;

}  // namespace ddprun::agent
