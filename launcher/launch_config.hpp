#pragma once
// The fully resolved launch configuration: what the command line, PET_* variables and
// (later) Slurm's environment say, after validation. The launcher produces it; the agent
// consumes it. Plain data, no behaviour: every field has torchrun's default.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/agent_config.hpp"
#include "common/seconds.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/round/round_settings.hpp"
#include "rendezvous/store/job_secret.hpp"

namespace ddprun::launcher {

// The worker-facing types are the agent's: the launcher fills them in.
using agent::EntryKind;
using agent::StdStreams;

struct LaunchConfig {
  // Node counts (--nnodes MIN:MAX) and workers per node.
  int min_nodes = 1;
  int max_nodes = 1;
  int nproc_per_node = 1;

  // Rendezvous.
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;  // as given; empty when not given
  std::string rdzv_host;      // parsed from rdzv_endpoint (or master_addr for static)
  std::optional<uint16_t> rdzv_port;
  std::string rdzv_id = "none";
  std::map<std::string, std::string> rdzv_conf;   // every k=v of --rdzv_conf, validated
  rendezvous::round::RdzvSettings rdzv_settings;  // the round protocol's keys, parsed once
                                                  // (static's `timeout` folded in)
  bool standalone = false;
  int node_rank = 0;
  std::optional<int>
      node_rank_hint;  // set when a rank hint exists (--node_rank given, SLURM_NODEID)
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  std::optional<std::string> local_addr;
  // --rdzv_backend etcd (etcd-v2, etcd-v3): the members, TLS and key prefix, checked once.
  std::optional<rendezvous::backends::etcd::EtcdOptions> etcd;
  // The job secret (--rdzv_conf secret_file, DDPRUN_RDZV_SECRET_FILE, DDPRUN_RDZV_SECRET), read
  // and checked once; c10d and static prove it to their store. Never printed.
  std::optional<rendezvous::store::JobSecret> rdzv_secret;

  // Worker lifecycle.
  int max_restarts = 0;
  common::Seconds monitor_interval{0.1};
  std::string start_method = "spawn";
  std::string role = "default";
  common::Seconds shutdown_timeout{30};
  common::Seconds exit_barrier_timeout{300};
  std::vector<int> signals_to_handle;  // signal numbers; default SIGTERM,SIGINT,SIGHUP,SIGQUIT
  std::string signals_to_handle_text = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  bool virtual_local_rank = false;  // LOCAL_RANK=0, CUDA_VISIBLE_DEVICES=<the worker's GPU>
  // --recovery live: survivors keep their workers when the membership changes.
  bool live_recovery = false;

  // Logs: --log-dir, --redirects, --tee, --local-ranks-filter, --duplicate-*-filters, as the
  // agent reads them.
  agent::LogConfig logs;
  std::string event_log_handler = "null";
  std::optional<std::string> logs_specs;
  std::optional<std::string> numa_binding;  // node|socket|exclusive|core-complex
  std::vector<std::vector<int>> numa_cpus;  // --numa-binding: CPUs per local rank
  std::optional<std::string> events_file;   // ddprun: one JSON line per agent event
  // ddprun: --watchdog-timeout, the progress watchdog (agent/watchdog/); nullopt: off.
  std::optional<common::Seconds> watchdog_timeout;
  // ddprun: --straggler-factor and --straggler-window (with the heartbeats above); 0: off.
  double straggler_factor = 2.0;
  common::Seconds straggler_window{60};
  // ddprun: --health-check, the node checks before each join (agent/node_check/); nullopt: off.
  std::optional<std::string> node_check_command;
  common::Seconds node_check_timeout{60};
  common::Seconds node_check_interval{30};

  // Environment variables torchrun reads, parsed here once (for --print-config; the agent's
  // file-timer setup, agent/watchdog/file_timer_setup, applies the watchdog's contract at each
  // start). TORCHELASTIC_ENABLE_FILE_TIMER=1 asks for the file-timer watchdog; its named pipe is
  // TORCHELASTIC_TIMER_FILE when given (else a fresh <tmp>/watchdog_timer_<uuid4> per start).
  bool file_timer_enabled = false;
  std::optional<std::string> timer_file;  // TORCHELASTIC_TIMER_FILE as given
  // USE_LIBUV: "1" (default) for libuv TCPStore servers, anything else for the legacy one.
  // torchrun only passes it on to the workers (their own stores); so does ddprun.
  bool use_libuv = true;
  // TORCHELASTIC_HEALTH_CHECK_PORT: the agent serves its health over HTTP on this port (torchrun
  // 2.4+ reads it but starts no server); a GET older than health_port_stale_after since the loop's
  // last progress is 503. The timeout is torchrun's 60 s, or DDPRUN_HEALTH_CHECK_TIMEOUT.
  std::optional<uint16_t> health_port;
  common::Seconds health_port_stale_after{60};
  // DDPRUN_JOB_PAGE_STACKS=1: the job page's stacks button works without a job secret too.
  bool job_page_stacks = false;
  // TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: after SIGKILL, how long the agent waits for a
  // worker to be reaped before it abandons it as stuck in uninterruptible sleep (D state) and
  // goes on. torchrun reads the variable for its own D-state health check (unset or 0: off);
  // ddprun never waits without a bound, so unset or 0 gives its default.
  common::Seconds uninterruptible_state_timeout{60};

  // Entry point.
  EntryKind entry_kind = EntryKind::kPythonScript;
  bool run_path = false;
  std::string entry_point;               // script, module, program, or "train"
  std::vector<std::string> entry_args;   // passed through untouched
  std::vector<std::string> worker_argv;  // the full command each worker runs

  // Environment changes the launcher decided (e.g. OMP_NUM_THREADS=1), applied to workers.
  std::map<std::string, std::string> worker_env_overrides;

  // Where each resolved value came from, for --print-config: "default", "cli", "env:PET_X",
  // "slurm:SLURM_X", "standalone".
  std::map<std::string, std::string> value_sources;
};

}  // namespace ddprun::launcher
