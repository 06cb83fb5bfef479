#pragma once
// The name this node goes by in logs, events and failure records: --local_addr, else the
// host name.

#include <optional>
#include <string>

namespace ddprun::agent {

std::string node_name(const std::optional<std::string>& local_addr);

}  // namespace ddprun::agent
