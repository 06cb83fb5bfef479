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

// Two sockets, one NUMA node each, 4 cores x 2 hardware threads per node (CPU c and c+8 share
// a core), two last-level caches of 2 cores per node, and two GPUs per node:
//   node 0: CPUs 0-3,8-11, caches {0,1,8,9} {2,3,10,11}, GPUs 0000:1a:00.0 0000:1b:00.0
//   node 1: CPUs 4-7,12-15, caches {4,5,12,13} {6,7,14,15}, GPUs 0000:8a:00.0 0000:8b:00.0
inline NumaTopology two_socket_topology() {
  NumaTopology t;
  t.gpus = {{"0000:1a:00.0", "GPU-aaaa1111", 0},
            {"0000:1b:00.0", "GPU-bbbb2222", 0},
            {"0000:8a:00.0", "GPU-cccc3333", 1},
            {"0000:8b:00.0", "GPU-dddd4444", 1}};
  t.nodes = {0, 1};
  t.node_cpus = {{0, {0, 1, 2, 3, 8, 9, 10, 11}}, {1, {4, 5, 6, 7, 12, 13, 14, 15}}};
  for (int cpu = 0; cpu < 16; ++cpu) {
    const int core = cpu % 8;
    t.allowed_cpus.insert(cpu);
    t.thread_siblings[cpu] = {core, core + 8};
    t.package[cpu] = core < 4 ? 0 : 1;
    const int first = core - core % 2;  // cores 0-1, 2-3, 4-5, 6-7 share a cache
    t.largest_cache_sharers[cpu] = {first, first + 1, first + 8, first + 9};
  }
  return t;
}

inline HostFacts test_machine() {
  HostFacts facts;
  facts.cpu_count = 8;
  facts.nvidia_gpu_count = 0;
  facts.executable_dir = "/opt/ddprun/bin";
  facts.python3_on_path = "/usr/bin/python3";
  facts.fresh_run_id = "7d3f0c55-1f0e-4b1c-9a7e-0a1b2c3d4e5f";
  // What probe_host reads when --numa-binding is given (GPU counting for --nproc-per-node
  // gpu is a separate fact and stays 0 here).
  facts.numa = two_socket_topology();
  return facts;
}

inline ResolvedLaunch resolve(const std::vector<std::string>& args, const Environment& env = {},
                              const HostFacts& facts = test_machine()) {
  return resolve_launch(parse_command_line(args, env), env, facts);
}

}  // namespace ddprun::launcher::testing
