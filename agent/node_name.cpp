#include "agent/node_name.hpp"

#include <unistd.h>

namespace ddprun::agent {

std::string node_name(const launcher::LaunchConfig& config) {
  if (config.local_addr && !config.local_addr->empty())
    return *config.local_addr;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "localhost";
  return name;
}

}  // namespace ddprun::agent
