#pragma once
// Which node checks run before a join (--health-check), and what their output means: pure, the
// facts read from the system (gpu_probe) and the command's outcome are inputs.
//
// The checks, all of them when --health-check is given:
// - folders: each must be writable (a file created and removed) with kMinFreeBytes free:
//   --log-dir when given, and for the bundled trainer (`train`) its snapshot folder, the folder
//   of a trainer_config.snapshot_path=PATH override on the command line, else the working
//   folder (its default snapshot.pt); a snapshot path set only inside a CONFIG file is not read.
// - GPUs: only where the node has them (/dev/nvidiactl or /dev/nvidiaN, or CUDA_VISIBLE_DEVICES
//   or NVIDIA_VISIBLE_DEVICES naming devices) and nvidia-smi is found on PATH:
//   `nvidia-smi --query-gpu=index,name --format=csv,noheader` must list every visible GPU. On a
//   CPU node, or without nvidia-smi, nothing runs.
// - the user's command, through /bin/sh -c: exit status 0 passes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/agent_config.hpp"

namespace ddprun::agent {

// A folder with less free space than this fails its check (a snapshot or a log needs room).
inline constexpr std::uint64_t kMinFreeBytes = 64ULL * 1024 * 1024;

struct GpuFacts {
  bool nvidiactl = false;  // /dev/nvidiactl exists
  int device_nodes = 0;    // /dev/nvidia0, /dev/nvidia1, ...
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> nvidia_visible_devices;
  std::optional<std::string> nvidia_smi;  // absolute path, when found on PATH
};

struct GpuCheck {
  std::vector<std::string> argv;  // the nvidia-smi query
  // GPU indexes that must be listed (CUDA_VISIBLE_DEVICES by index); empty: see min_count.
  std::vector<int> indexes;
  int min_count = 1;  // at least this many GPUs listed
};

struct NodeCheckPlan {
  std::vector<std::string> folders;
  std::optional<GpuCheck> gpus;
  std::string command;  // run with /bin/sh -c
};

NodeCheckPlan plan_node_checks(const NodeCheckConfig& config, const WorkerSpec& workers,
                               const LogConfig& logs, const GpuFacts& facts);

// The folder the bundled trainer writes its snapshot to, as the command line tells it; nullopt
// for any other entry point.
std::optional<std::string> trainer_snapshot_folder(const WorkerSpec& workers);

// What is wrong with nvidia-smi's answer to the plan's query; nullopt when every GPU answered.
std::optional<std::string> gpu_query_problem(std::string_view output, const GpuCheck& check);

// The last max_lines non-blank lines of a command's output, joined with " | ", each cut to 200
// characters.
std::string last_output_lines(std::string_view output, std::size_t max_lines);

}  // namespace ddprun::agent
