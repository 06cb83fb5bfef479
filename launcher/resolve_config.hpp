#pragma once
// Step 2 of the launcher: from the parsed command line, the environment and the host facts to
// a validated LaunchConfig. Precedence for every option: command line, then PET_<NAME>, then
// Slurm's environment, then torchrun's default; --standalone overrides the rendezvous options.
// Pure: no I/O, no clocks. Throws UsageError for any value that is wrong.

#include <string>
#include <vector>

#include "launcher/command_line.hpp"
#include "launcher/environment.hpp"
#include "launcher/host_facts.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

struct ResolvedLaunch {
  LaunchConfig config;
  std::vector<std::string> warnings;  // for stderr, without the "ddprun: warning:" prefix
};

ResolvedLaunch resolve_launch(const ParsedCommandLine& parsed, const Environment& env,
                              const HostFacts& facts);

// torchrun's OMP_NUM_THREADS warning text, word for word.
std::string omp_num_threads_warning();

}  // namespace ddprun::launcher
