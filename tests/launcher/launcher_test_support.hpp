#pragma once
// Shared helpers for the in-process launcher tests: a described machine and a one-call
// parse + resolve.

#include <string>
#include <vector>

#include "launcher/command_line.hpp"
#include "launcher/environment.hpp"
#include "launcher/host_facts.hpp"
#include "launcher/resolve_config.hpp"

namespace ddprun::launcher::testing {

inline HostFacts test_machine() {
  HostFacts facts;
  facts.cpu_count = 8;
  facts.nvidia_gpu_count = 0;
  facts.executable_dir = "/opt/ddprun/bin";
  facts.python3_on_path = "/usr/bin/python3";
  facts.fresh_run_id = "7d3f0c55-1f0e-4b1c-9a7e-0a1b2c3d4e5f";
  return facts;
}

inline ResolvedLaunch resolve(const std::vector<std::string>& args, const Environment& env = {},
                              const HostFacts& facts = test_machine()) {
  return resolve_launch(parse_command_line(args, env), env, facts);
}

}  // namespace ddprun::launcher::testing
