#include "agent/base/node_name.hpp"

#include <unistd.h>

namespace ddprun::agent {

std::string node_name(const std::optional<std::string>& local_addr) {
  if (local_addr && !local_addr->empty())
    return *local_addr;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "localhost";
  return name;
}

}  // namespace ddprun::agent
