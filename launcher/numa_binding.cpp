#include "launcher/numa_binding.hpp"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "common/text.hpp"
#include "launcher/gpu_visibility.hpp"
#include "launcher/text.hpp"
#include "launcher/usage_error.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOption = "--numa-binding";
constexpr std::string_view kNvidiaVendor = "0x10de";
constexpr int kMaxCpuNumber = 1 << 20;  // far above any machine; bounds a malformed list
constexpr std::size_t kMaxSysfsFile = 64 * 1024;

std::optional<std::string> read_small_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in)
    return std::nullopt;
  std::string text(kMaxSysfsFile, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

std::optional<int> read_int(const fs::path& path) {
  const auto text = read_small_file(path);
  return text ? common::parse_integer<int>(*text) : std::nullopt;
}

std::set<int> read_cpu_list(const fs::path& path) {
  const auto text = read_small_file(path);
  if (!text)
    return {};
  return parse_cpu_list(*text).value_or(std::set<int>{});
}

// PCI display controllers (class 0x0300xx VGA, 0x0302xx 3D) of NVIDIA: the GPUs, without
// NVSwitches and audio functions.
bool is_nvidia_gpu(const fs::path& device) {
  const auto vendor = read_small_file(device / "vendor");
  const auto device_class = read_small_file(device / "class");
  return vendor && *vendor == kNvidiaVendor && device_class &&
         (device_class->starts_with("0x0300") || device_class->starts_with("0x0302"));
}

std::string gpu_uuid(const fs::path& root, const std::string& pci_address) {
  const auto info = read_small_file(root / "proc/driver/nvidia/gpus" / pci_address / "information");
  if (!info)
    return {};
  std::istringstream lines(*info);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("GPU UUID:"))
      continue;
    const auto start = line.find("GPU-");
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

std::vector<NumaGpu> read_gpus(const fs::path& root) {
  std::vector<NumaGpu> gpus;
  std::error_code error;
  const fs::path devices = root / "sys/bus/pci/devices";
  for (fs::directory_iterator it(devices, error), end; !error && it != end; it.increment(error)) {
    if (!is_nvidia_gpu(it->path()))
      continue;
    NumaGpu gpu;
    gpu.pci_address = it->path().filename().string();
    gpu.numa_node = std::max(read_int(it->path() / "numa_node").value_or(0), 0);
    gpu.uuid = gpu_uuid(root, gpu.pci_address);
    gpus.push_back(std::move(gpu));
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const NumaGpu& a, const NumaGpu& b) { return a.pci_address < b.pci_address; });
  return gpus;
}

// The CPUs of the last cache level (unified or data) the CPU has, as torchrun picks it.
std::set<int> largest_cache_sharers(const fs::path& cpu_dir) {
  std::set<int> sharers;
  int largest_level = -1;
  std::error_code error;
  for (fs::directory_iterator it(cpu_dir / "cache", error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("index") || !common::parse_integer<int>(std::string_view(name).substr(5)))
      continue;
    const auto type = read_small_file(it->path() / "type");
    if (!type || (*type != "Unified" && *type != "Data"))
      continue;
    const auto level = read_int(it->path() / "level");
    if (!level || *level <= largest_level)
      continue;
    largest_level = *level;
    sharers = read_cpu_list(it->path() / "shared_cpu_list");
  }
  return sharers;
}

// --- the pure half ------------------------------------------------------------------------

[[noreturn]] void cannot_bind(const std::string& problem, const std::string& expected) {
  throw UsageError(kOption, problem, expected);
}

// CUDA_VISIBLE_DEVICES as indices into topology.gpus (all of them when unset). Follows CUDA:
// the list ends at the first entry that is not a GPU.
std::vector<std::size_t> visible_gpu_indices(const NumaTopology& topology,
                                             const std::optional<std::string>& visible) {
  std::vector<std::size_t> indices;
  if (!visible) {
    for (std::size_t i = 0; i < topology.gpus.size(); ++i)
      indices.push_back(i);
    return indices;
  }
  for (const std::string_view item : cuda_visible_entries(*visible)) {
    if (item.starts_with("MIG-")) {
      cannot_bind(cat("CUDA_VISIBLE_DEVICES names the MIG device ", item,
                      ", whose GPU ddprun cannot tell without the NVIDIA driver's library"),
                  "GPU indices or GPU- UUIDs in CUDA_VISIBLE_DEVICES");
    }
    std::optional<std::size_t> found;
    if (item.starts_with("GPU-")) {
      for (std::size_t i = 0; i < topology.gpus.size(); ++i) {
        if (!topology.gpus[i].uuid.empty() && topology.gpus[i].uuid.starts_with(item))
          found = i;
      }
    } else if (const auto index = common::parse_integer<int>(item);
               index && *index >= 0 && static_cast<std::size_t>(*index) < topology.gpus.size()) {
      found = static_cast<std::size_t>(*index);
    }
    if (!found || std::find(indices.begin(), indices.end(), *found) != indices.end())
      break;
    indices.push_back(*found);
  }
  return indices;
}

std::set<int> allowed_cpus_of_node(const NumaTopology& topology, int node) {
  std::set<int> cpus;
  if (const auto it = topology.node_cpus.find(node); it != topology.node_cpus.end()) {
    std::set_intersection(it->second.begin(), it->second.end(), topology.allowed_cpus.begin(),
                          topology.allowed_cpus.end(), std::inserter(cpus, cpus.end()));
  }
  return cpus;
}

// Groups CPUs by a key CPU (the smallest CPU of the core or cache they share), in key order.
std::map<int, std::set<int>> group_by(const std::set<int>& cpus,
                                      const std::map<int, std::set<int>>& shared_with) {
  std::map<int, std::set<int>> groups;
  for (int cpu : cpus) {
    const auto it = shared_with.find(cpu);
    const int key = it == shared_with.end() || it->second.empty() ? cpu : *it->second.begin();
    groups[key].insert(cpu);
  }
  return groups;
}

std::set<int> node_mode(const NumaTopology& topology, const NumaGpu& gpu) {
  return allowed_cpus_of_node(topology, gpu.numa_node);
}

std::set<int> socket_mode(const NumaTopology& topology, const NumaGpu& gpu) {
  const auto package_of_node = [&](int node) -> std::optional<int> {
    const std::set<int> cpus = allowed_cpus_of_node(topology, node);
    if (cpus.empty())
      return std::nullopt;  // a node without CPUs (memory only) belongs to no socket here
    const auto it = topology.package.find(*cpus.begin());
    return it == topology.package.end() ? std::nullopt : std::optional<int>(it->second);
  };
  const auto socket = package_of_node(gpu.numa_node);
  if (!socket)
    return {};
  std::set<int> cpus;
  for (int node : topology.nodes) {
    if (package_of_node(node) == socket) {
      const std::set<int> node_cpus = allowed_cpus_of_node(topology, node);
      cpus.insert(node_cpus.begin(), node_cpus.end());
    }
  }
  return cpus;
}

// The GPUs on the node of `gpu` (visible ones, in index order) and the place of `gpu` among them.
std::pair<std::size_t, std::size_t> place_on_node(const NumaTopology& topology,
                                                  const std::vector<std::size_t>& visible,
                                                  std::size_t gpu_index) {
  std::vector<std::size_t> on_node;
  for (std::size_t index : visible) {
    if (topology.gpus[index].numa_node == topology.gpus[gpu_index].numa_node)
      on_node.push_back(index);
  }
  std::sort(on_node.begin(), on_node.end());
  const auto at = std::find(on_node.begin(), on_node.end(), gpu_index);
  return {static_cast<std::size_t>(at - on_node.begin()), on_node.size()};
}

std::set<int> exclusive_mode(const NumaTopology& topology, const std::vector<std::size_t>& visible,
                             std::size_t gpu_index) {
  const NumaGpu& gpu = topology.gpus[gpu_index];
  const auto [place, gpus_on_node] = place_on_node(topology, visible, gpu_index);
  const auto cores =
      group_by(allowed_cpus_of_node(topology, gpu.numa_node), topology.thread_siblings);
  const std::size_t per_gpu = cores.size() / gpus_on_node;
  const std::size_t with_extra = cores.size() % gpus_on_node;  // the first GPUs get one more
  if (per_gpu < 1) {
    cannot_bind(cat("exclusive: NUMA node ", std::to_string(gpu.numa_node), " has ",
                    std::to_string(cores.size()), " physical cores for ",
                    std::to_string(gpus_on_node), " GPUs"),
                "at least one core per GPU, or --numa-binding node");
  }
  const std::size_t start = place * per_gpu + std::min(place, with_extra);
  const std::size_t end = start + per_gpu + (place < with_extra ? 1 : 0);
  std::set<int> cpus;
  std::size_t i = 0;
  for (const auto& [key, core_cpus] : cores) {
    if (i >= start && i < end)
      cpus.insert(core_cpus.begin(), core_cpus.end());
    ++i;
  }
  return cpus;
}

std::set<int> core_complex_mode(const NumaTopology& topology,
                                const std::vector<std::size_t>& visible, std::size_t gpu_index) {
  const NumaGpu& gpu = topology.gpus[gpu_index];
  const auto place = place_on_node(topology, visible, gpu_index).first;
  const auto caches =
      group_by(allowed_cpus_of_node(topology, gpu.numa_node), topology.largest_cache_sharers);
  if (caches.empty())
    return {};
  // Caches with more CPUs first, then by their first CPU.
  std::vector<std::pair<int, std::set<int>>> ordered(caches.begin(), caches.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return ordered[place % ordered.size()].second;
}

}  // namespace

std::optional<std::set<int>> parse_cpu_list(std::string_view text) {
  std::set<int> cpus;
  while (!text.empty()) {
    const auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\n'))
      item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\n'))
      item.remove_suffix(1);
    if (!item.empty()) {
      const auto dash = item.find('-');
      const auto first = common::parse_integer<int>(item.substr(0, dash));
      const auto last = dash == std::string_view::npos
                            ? first
                            : common::parse_integer<int>(item.substr(dash + 1));
      if (!first || !last || *first < 0 || *last < *first || *last > kMaxCpuNumber)
        return std::nullopt;
      for (int cpu = *first; cpu <= *last; ++cpu)
        cpus.insert(cpu);
    }
    if (comma == std::string_view::npos)
      break;
    text.remove_prefix(comma + 1);
  }
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  std::string text;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1)
      ++j;
    text += cat(text.empty() ? "" : ",", std::to_string(sorted[i]),
                j > i ? cat("-", std::to_string(sorted[j])) : std::string());
    i = j + 1;
  }
  return text;
}

std::set<int> current_cpu_affinity() {
  std::set<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set))
      cpus.insert(cpu);
  }
  return cpus;
}

NumaTopology read_numa_topology(const std::string& root_text, std::set<int> allowed_cpus) {
  const fs::path root = root_text.empty() ? fs::path("/") : fs::path(root_text);
  NumaTopology topology;
  topology.gpus = read_gpus(root);
  topology.allowed_cpus = std::move(allowed_cpus);
  const fs::path node_dir = root / "sys/devices/system/node";
  topology.nodes = read_cpu_list(node_dir / "possible");
  for (int node : topology.nodes)
    topology.node_cpus[node] =
        read_cpu_list(node_dir / cat("node", std::to_string(node)) / "cpulist");
  const fs::path cpu_root = root / "sys/devices/system/cpu";
  for (int cpu : topology.allowed_cpus) {
    const fs::path cpu_dir = cpu_root / cat("cpu", std::to_string(cpu));
    topology.thread_siblings[cpu] = read_cpu_list(cpu_dir / "topology/thread_siblings_list");
    if (const auto package = read_int(cpu_dir / "topology/physical_package_id"))
      topology.package[cpu] = *package;
    topology.largest_cache_sharers[cpu] = largest_cache_sharers(cpu_dir);
  }
  return topology;
}

std::vector<std::vector<int>> plan_numa_binding(const NumaTopology& topology, std::string_view mode,
                                                int nproc_per_node,
                                                const std::optional<std::string>& visible_devices) {
  const std::vector<std::size_t> visible = visible_gpu_indices(topology, visible_devices);
  if (visible.empty()) {
    cannot_bind(
        cat("binds each worker near its GPU, but no NVIDIA GPU is visible (",
            std::to_string(topology.gpus.size()), " found",
            visible_devices ? cat(", CUDA_VISIBLE_DEVICES='", *visible_devices, "'") : "", ")"),
        "a machine with NVIDIA GPUs, or no --numa-binding");
  }
  if (static_cast<std::size_t>(nproc_per_node) > visible.size()) {
    cannot_bind(cat("local rank ", std::to_string(visible.size()),
                    " has no GPU: ", std::to_string(nproc_per_node), " workers, ",
                    std::to_string(visible.size()), " visible GPUs"),
                "at most one worker per visible GPU");
  }
  if (topology.nodes.empty()) {
    cannot_bind("the kernel shows no NUMA nodes (/sys/devices/system/node)",
                "a Linux machine with NUMA information in sysfs");
  }
  std::vector<std::vector<int>> plan;
  for (int local_rank = 0; local_rank < nproc_per_node; ++local_rank) {
    const std::size_t gpu_index = visible[static_cast<std::size_t>(local_rank)];
    const NumaGpu& gpu = topology.gpus[gpu_index];
    std::set<int> cpus;
    if (mode == "node") {
      cpus = node_mode(topology, gpu);
    } else if (mode == "socket") {
      cpus = socket_mode(topology, gpu);
    } else if (mode == "exclusive") {
      cpus = exclusive_mode(topology, visible, gpu_index);
    } else if (mode == "core-complex") {
      cpus = core_complex_mode(topology, visible, gpu_index);
    } else {
      cannot_bind(cat("'", mode, "' is not a binding mode"), "node|socket|exclusive|core-complex");
    }
    if (cpus.empty()) {
      cannot_bind(
          cat("no CPU of NUMA node ", std::to_string(gpu.numa_node), " (GPU ", gpu.pci_address,
              ", local rank ", std::to_string(local_rank), ") is available to ddprun"),
          "CPUs on the GPU's node in ddprun's CPU affinity");
    }
    plan.emplace_back(cpus.begin(), cpus.end());
  }
  return plan;
}

}  // namespace ddprun::launcher
