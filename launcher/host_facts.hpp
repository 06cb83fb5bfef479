#pragma once
// What the launcher needs to know about the machine it runs on. probe_host() does the I/O
// (sysconf, /proc, /dev, PATH, /dev/urandom); everything that decides from these facts is
// pure and takes them as a value, so tests can describe any machine.

#include <optional>
#include <string>

#include "launcher/entry_point.hpp"
#include "launcher/environment.hpp"
#include "launcher/numa_binding.hpp"

namespace ddprun::launcher {

struct HostFacts {
  int cpu_count = 1;                           // online CPUs (Python's os.cpu_count())
  int nvidia_gpu_count = 0;                    // GPUs the NVIDIA driver exposes, before
                                               // CUDA_VISIBLE_DEVICES
  std::string executable_dir;                  // directory of the running ddprun
  std::optional<std::string> python3_on_path;  // first executable python3 on $PATH
  std::string fresh_run_id;                    // a random UUID4, for --standalone
  std::optional<NumaTopology> numa;            // read only when --numa-binding asks for it
};

struct ProbeRequest {
  bool numa_topology = false;  // --numa-binding was given: read the CPU and GPU topology
};

HostFacts probe_host(const Environment& env, ProbeRequest request = {});

}  // namespace ddprun::launcher
