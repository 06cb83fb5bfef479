#include "agent/node_check/node_check_probe.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/stacks/stack_capture_probe.hpp"

namespace ddprun::agent {

namespace {

std::optional<std::string> lookup(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end())
    return std::nullopt;
  return it->second;
}

std::string mebibytes(std::uint64_t bytes) {
  return std::to_string(bytes / (1024 * 1024)) + " MiB";
}

}  // namespace

GpuFacts probe_gpu_facts(const EnvMap& env) {
  GpuFacts facts;
  std::error_code error;
  facts.nvidiactl = std::filesystem::exists("/dev/nvidiactl", error);
  for (int index = 0; std::filesystem::exists("/dev/nvidia" + std::to_string(index), error);
       ++index)
    ++facts.device_nodes;
  facts.cuda_visible_devices = lookup(env, "CUDA_VISIBLE_DEVICES");
  facts.nvidia_visible_devices = lookup(env, "NVIDIA_VISIBLE_DEVICES");
  facts.nvidia_smi = find_on_path(env, "nvidia-smi");
  return facts;
}

std::optional<std::string> folder_problem(const std::string& folder, std::uint64_t min_free_bytes) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error)
    return "cannot create it: " + error.message();
  std::string probe = (std::filesystem::path(folder) / ".ddprun-node-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    return std::string("not writable: ") + std::strerror(errno);
  const bool written = ::write(fd, "ok\n", 3) == 3;
  const int write_errno = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!written)
    return std::string("not writable: ") + std::strerror(write_errno);
  struct statvfs stats{};
  if (::statvfs(folder.c_str(), &stats) != 0)
    return std::string("cannot read its free space: ") + std::strerror(errno);
  const std::uint64_t free_bytes =
      static_cast<std::uint64_t>(stats.f_bavail) * static_cast<std::uint64_t>(stats.f_frsize);
  if (free_bytes < min_free_bytes)
    return mebibytes(free_bytes) + " free, under " + mebibytes(min_free_bytes);
  return std::nullopt;
}

}  // namespace ddprun::agent
