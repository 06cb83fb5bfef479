#pragma once
// The agent's own configuration: what run_agent needs, in one part per component, so that each
// component receives only what it reads. The launcher builds it from the command line
// (launcher/agent_config_builder); tests and the scale simulator build the parts they need.
// Plain data, already validated; durations are std::chrono (common::Seconds) from here on.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/seconds.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/round/round_settings.hpp"

namespace ddprun::agent {

// Which streams of a worker go to files (torchrun's Std bitmask: 0 none, 1 out, 2 err, 3 both),
// either one value for every local rank or a per-local-rank map.
struct StdStreams {
  int all = 0;
  std::map<int, int> per_local_rank;

  int for_local_rank(int local_rank) const {
    auto it = per_local_rank.find(local_rank);
    return it == per_local_rank.end() ? (per_local_rank.empty() ? all : 0) : it->second;
  }
};

enum class EntryKind {
  kPythonScript,    // <python> -u script args
  kPythonModule,    // <python> -u -m module args
  kBinary,          // --no_python: program args
  kBundledTrainer,  // the word `train`: <dir of ddprun>/ddprun-train args
};

enum class RendezvousBackend : std::uint8_t {
  c10d,          // the agents' store, hosted by an agent (--standalone: a private one)
  static_store,  // node 0 hosts the store; ranks from --node_rank
  etcd,          // etcd's members (RendezvousConfig::etcd)
};

// What the node brings to the job: its workers (LOCAL_WORLD_SIZE; its record in the round) and
// the job's restart budget (the round machine spends it; the workers are told it). One holder:
// the rendezvous and the workers read it from here.
struct NodeShape {
  int nproc_per_node = 1;
  int max_restarts = 0;
};

// The node's side of the rendezvous (agent/node/): backend, endpoint, this node's place. Every
// value resolved by the launcher (launcher/resolve_config): the agent applies no defaults.
struct RendezvousConfig {
  RendezvousBackend backend = RendezvousBackend::static_store;
  // c10d and static: the store's address (c10d's default localhost:29400; static's the master
  // address and port; --standalone's is chosen when its agent binds, port 0 until then).
  std::string host = "localhost";
  uint16_t port = 0;
  std::string run_id;                        // --standalone: a fresh one per job
  rendezvous::round::RdzvSettings settings;  // static's `timeout` already folded in
  std::optional<rendezvous::backends::etcd::EtcdOptions> etcd;
  bool standalone = false;
  int node_rank = 0;
  std::optional<int> node_rank_hint;
  std::optional<std::string> local_addr;
  // The job secret (c10d and static): the store this agent hosts serves the agents' keys only
  // to agents that prove they know it, and this agent proves it to the store. Empty: none, the
  // rendezvous is open as torchrun's.
  std::string secret;
  std::string secret_source;  // where it came from, for the start line; never the secret
  int min_nodes = 1;
  int max_nodes = 1;
  NodeShape shape;
  common::Seconds exit_barrier_timeout{300};
  // A watchdog runs here, so this node captures its stacks when another node's worker hangs.
  bool captures_stacks_for_peers = false;
  // Node checks (--health-check) before each join; set: how long a node that failed them waits
  // before it checks again.
  std::optional<common::Seconds> node_check_interval;
};

// The workers each round starts (agent/workers/, agent/loop/).
// How many: RendezvousConfig::shape.
struct WorkerSpec {
  std::string role = "default";
  EntryKind entry_kind = EntryKind::kPythonScript;
  std::string entry_point;        // script, module, program or "train": the table's name
  std::vector<std::string> argv;  // the full command each worker runs
  std::map<std::string, std::string> env_overrides;  // e.g. OMP_NUM_THREADS=1
  bool virtual_local_rank = false;                   // LOCAL_RANK=0, CUDA_VISIBLE_DEVICES=<its GPU>
  std::vector<std::vector<int>> numa_cpus;           // CPUs per local rank; empty: no binding
  std::string signals_to_handle_text = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  // --recovery live: on a membership change, workers that joined the live-recovery protocol
  // stay up and learn the new world from their control file (agent/workers/live_control.hpp).
  bool live_recovery = false;
};

// Where the workers' streams go (agent/logs/).
struct LogConfig {
  std::optional<std::string> log_dir;
  StdStreams redirects;
  StdStreams tee;
  std::vector<int> local_ranks_filter;  // empty: every local rank is shown
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
};

// The hang watchdogs (agent/watchdog/). torchrun's file timer is asked for by the agent's
// environment at each start (TORCHELASTIC_ENABLE_FILE_TIMER), as torchrun reads it.
struct WatchdogConfig {
  std::optional<common::Seconds> heartbeat_timeout;  // --watchdog-timeout; off: none
  // Straggler reports from the heartbeats (agent/watchdog/straggler_watch): 0: off.
  double straggler_factor = 2.0;
  common::Seconds straggler_window{60};
};

// How the run loop watches and stops the workers (agent/loop/).
struct SupervisionConfig {
  common::Seconds shutdown_timeout{30};
  // After SIGKILL, how long a worker may take to be reaped before the agent abandons it as stuck
  // in uninterruptible sleep (TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT,
  // agent/workers/stuck_workers).
  common::Seconds reap_after_kill_limit{60};
  std::vector<int> signals_to_handle;  // beyond SIGTERM, SIGINT, SIGHUP and SIGQUIT
};

// The health port (agent/health/): an HTTP server on TORCHELASTIC_HEALTH_CHECK_PORT, as torchrun
// reads it; stale_after is torchrun's timeout (it passes 60 s), DDPRUN_HEALTH_CHECK_TIMEOUT
// changes it. Not the node checks (--health-check, NodeCheckConfig): the names say which.
struct HealthPortConfig {
  std::optional<uint16_t> port;  // nothing: no server
  std::string host = "0.0.0.0";  // the node's health is asked for from elsewhere
  common::Seconds stale_after{60};
  // The job page's stacks button without a job secret (with one it always works).
  bool page_stacks_without_secret = false;
};

// Node checks before each join (agent/node_check/): --health-check. The interval between a
// failed check and the next is RendezvousConfig::node_check_interval (the round machine waits).
struct NodeCheckConfig {
  std::optional<std::string> command;  // run with /bin/sh -c; nothing: no node checks at all
  common::Seconds timeout{60};         // each command is killed after this long (failed)
};

struct AgentConfig {
  RendezvousConfig rendezvous;
  WorkerSpec workers;
  LogConfig logs;
  WatchdogConfig watchdog;
  SupervisionConfig supervision;
  HealthPortConfig health_port;
  NodeCheckConfig node_check;
  std::optional<std::string> events_file;  // one JSON line per agent event
};

}  // namespace ddprun::agent
