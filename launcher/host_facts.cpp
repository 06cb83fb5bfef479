#include "launcher/host_facts.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "common/random.hpp"
#include "launcher/text.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

int count_nvidia_gpus() {
  std::error_code error;
  // The driver lists one directory per GPU here; containers often have only /dev/nvidiaN.
  int from_proc = 0;
  for (fs::directory_iterator it("/proc/driver/nvidia/gpus", error), end; !error && it != end;
       it.increment(error)) {
    ++from_proc;
  }
  if (from_proc > 0)
    return from_proc;
  int from_dev = 0;
  error.clear();
  for (fs::directory_iterator it("/dev", error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      ++from_dev;
    }
  }
  return from_dev;
}

std::string executable_dir() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string(".") : self.parent_path().string();
}

std::optional<std::string> find_on_path(const Environment& env, std::string_view program) {
  const auto path = lookup(env, "PATH");
  if (!path)
    return std::nullopt;
  std::string_view rest = *path;
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    const std::string candidate = cat(dir.empty() ? std::string_view(".") : dir, "/", program);
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos)
      return std::nullopt;
    rest.remove_prefix(colon + 1);
  }
}

}  // namespace

HostFacts probe_host(const Environment& env, ProbeRequest request) {
  HostFacts facts;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  facts.cpu_count = cpus > 0 ? static_cast<int>(cpus) : 1;
  facts.nvidia_gpu_count = count_nvidia_gpus();
  facts.executable_dir = executable_dir();
  facts.python3_on_path = find_on_path(env, "python3");
  facts.fresh_run_id = common::random_uuid4();
  if (request.numa_topology)
    facts.numa = read_numa_topology("", current_cpu_affinity());
  return facts;
}

}  // namespace ddprun::launcher
