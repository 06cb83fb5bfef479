#pragma once
// --numa-binding: the CPUs each worker is bound to, by torchrun 2.13's rules
// (torch/numa/binding.py: modes node, socket, exclusive, core-complex), computed from the
// machine's topology without LibTorch or numactl. Local rank N uses visible GPU N, as in
// torchrun. read_numa_topology() does the I/O (sysfs, the NVIDIA driver's /proc entries);
// plan_numa_binding() is pure and throws UsageError naming the reason when the binding cannot
// apply (no visible GPU, fewer GPUs than workers, a MIG device, no CPUs to bind to).
//
// GPUs are numbered in PCI bus order, which is CUDA's order with CUDA_DEVICE_ORDER=PCI_BUS_ID
// and, for identical GPUs, its default order too.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

struct NumaGpu {
  std::string pci_address;  // "0000:3b:00.0"
  std::string uuid;         // "GPU-..." from the driver, or "" when unknown
  int numa_node = 0;        // the device's node (-1 in sysfs, a single-node machine, reads 0)
};

struct NumaTopology {
  std::vector<NumaGpu> gpus;                           // NVIDIA GPUs in PCI bus order
  std::set<int> allowed_cpus;                          // the CPUs ddprun may run on
  std::set<int> nodes;                                 // /sys/devices/system/node/possible
  std::map<int, std::set<int>> node_cpus;              // node -> its CPUs
  std::map<int, std::set<int>> thread_siblings;        // CPU -> CPUs of its physical core
  std::map<int, int> package;                          // CPU -> socket (physical_package_id)
  std::map<int, std::set<int>> largest_cache_sharers;  // CPU -> CPUs sharing its last cache
};

// Reads the topology below `root` ("" for the machine itself; a test passes a fake tree).
// Unreadable parts stay empty: plan_numa_binding() reports what is missing.
NumaTopology read_numa_topology(const std::string& root, std::set<int> allowed_cpus);

// The CPUs ddprun itself may run on (sched_getaffinity).
std::set<int> current_cpu_affinity();

// One CPU list per local rank, for `mode` (node|socket|exclusive|core-complex).
std::vector<std::vector<int>> plan_numa_binding(const NumaTopology& topology, std::string_view mode,
                                                int nproc_per_node,
                                                const std::optional<std::string>& visible_devices);

// "0-3,8": sysfs's list form, both ways. parse_cpu_list returns nullopt for malformed text.
std::optional<std::set<int>> parse_cpu_list(std::string_view text);
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace ddprun::launcher
