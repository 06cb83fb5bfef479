#include <cstdio>

#include "agent/agent.hpp"
#include "launcher/launch_config.hpp"

int main() {
  std::fprintf(stderr, "ddprun: the command line is not implemented yet\n");
  return 2;
}
