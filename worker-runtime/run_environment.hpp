#pragma once
// The worker contract torchrun (and ddprun's agent) hands every worker through its environment.
// Pure: the caller passes a lookup function, so tests need no real environment.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ddprun::train {

struct RunEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;
  bool use_agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: the agent hosts the store
  int64_t restart_count = 0;     // TORCHELASTIC_RESTART_COUNT, names the store prefix
  std::string gloo_interface;    // GLOO_SOCKET_IFNAME, empty when unset
  // DDPRUN_AGENT_METRICS: where rank 0 also appends its metrics lines, for ddprun's job page
  // (the agent sets it for the bundled trainer); empty when unset.
  std::string agent_metrics_path;
  // DDPRUN_LIVE_CONTROL (ddprun --recovery live): the agent's control file (live_world.hpp);
  // empty: no live recovery. DDPRUN_LIVE_WAIT_SECONDS: how long to wait for the next world.
  std::string live_control_path;
  int64_t live_wait_seconds = 660;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Without RANK/WORLD_SIZE the trainer runs as a single process. Throws std::invalid_argument
// naming the variable for malformed or inconsistent values.
RunEnvironment read_run_environment(const EnvLookup& lookup);

// The store prefix PyTorch's env:// rendezvous uses for an agent-hosted store.
std::string agent_store_prefix(const RunEnvironment& env);

}  // namespace ddprun::train
