#include "launcher/agent_config_builder.hpp"

#include <stdexcept>
#include <string>

namespace ddprun::launcher {

namespace {

// resolve_config accepted only these (etcd-v2 became etcd; --standalone made it c10d).
agent::RendezvousBackend rendezvous_backend(const std::string& name) {
  if (name == "c10d") {
    return agent::RendezvousBackend::c10d;
  }
  if (name == "etcd") {
    return agent::RendezvousBackend::etcd;
  }
  if (name == "static") {
    return agent::RendezvousBackend::static_store;
  }
  throw std::logic_error("resolve_config let --rdzv_backend " + name + " through");
}

}  // namespace

agent::AgentConfig build_agent_config(const LaunchConfig& config) {
  agent::AgentConfig agent;

  agent::RendezvousConfig& rdzv = agent.rendezvous;
  rdzv.backend = rendezvous_backend(config.rdzv_backend);
  // resolve_endpoint gave c10d and static their store (etcd has members instead).
  rdzv.host = config.rdzv_host;
  rdzv.port = config.rdzv_port.value_or(0);
  rdzv.run_id = config.rdzv_id;
  rdzv.settings = config.rdzv_settings;
  rdzv.etcd = config.etcd;
  rdzv.standalone = config.standalone;
  rdzv.node_rank = config.node_rank;
  rdzv.node_rank_hint = config.node_rank_hint;
  rdzv.local_addr = config.local_addr;
  if (config.rdzv_secret) {
    rdzv.secret = config.rdzv_secret->value;
    rdzv.secret_source = config.rdzv_secret->source;
  }
  rdzv.min_nodes = config.min_nodes;
  rdzv.max_nodes = config.max_nodes;
  rdzv.shape.nproc_per_node = config.nproc_per_node;
  rdzv.shape.max_restarts = config.max_restarts;
  rdzv.exit_barrier_timeout = config.exit_barrier_timeout;
  rdzv.captures_stacks_for_peers = config.file_timer_enabled || config.watchdog_timeout;

  agent::WorkerSpec& workers = agent.workers;
  workers.role = config.role;
  workers.entry_kind = config.entry_kind;
  workers.entry_point = config.entry_point;
  workers.argv = config.worker_argv;
  workers.env_overrides = config.worker_env_overrides;
  workers.virtual_local_rank = config.virtual_local_rank;
  workers.numa_cpus = config.numa_cpus;
  workers.signals_to_handle_text = config.signals_to_handle_text;
  workers.live_recovery = config.live_recovery;

  agent.logs = config.logs;

  agent.watchdog.heartbeat_timeout = config.watchdog_timeout;
  agent.watchdog.straggler_factor = config.straggler_factor;
  agent.watchdog.straggler_window = config.straggler_window;

  agent.supervision.shutdown_timeout = config.shutdown_timeout;
  agent.supervision.reap_after_kill_limit = config.uninterruptible_state_timeout;
  agent.supervision.signals_to_handle = config.signals_to_handle;

  agent.health_port.port = config.health_port;
  agent.health_port.stale_after = config.health_port_stale_after;
  agent.health_port.page_stacks_without_secret = config.job_page_stacks;

  agent.node_check.command = config.node_check_command;
  agent.node_check.timeout = config.node_check_timeout;
  if (config.node_check_command)
    rdzv.node_check_interval = config.node_check_interval;

  agent.events_file = config.events_file;
  return agent;
}

}  // namespace ddprun::launcher
