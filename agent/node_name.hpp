#pragma once
// The name this node goes by in logs, events and failure records: --local_addr, else the
// host name.

#include <string>

#include "launcher/launch_config.hpp"

namespace ddprun::agent {

std::string node_name(const launcher::LaunchConfig& config);

}  // namespace ddprun::agent
