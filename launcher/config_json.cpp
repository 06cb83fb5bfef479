#include "launcher/config_json.hpp"

#include <nlohmann/json.hpp>

#include "launcher/numa_binding.hpp"

namespace ddprun::launcher {
namespace {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json streams_json(const StdStreams& streams) {
  nlohmann::json per_rank = nlohmann::json::object();
  for (const auto& [rank, bits] : streams.per_local_rank)
    per_rank[std::to_string(rank)] = bits;
  return {{"all", streams.all}, {"per_local_rank", per_rank}};
}

}  // namespace

std::string entry_kind_name(EntryKind kind) {
  switch (kind) {
    case EntryKind::kPythonScript:
      return "python_script";
    case EntryKind::kPythonModule:
      return "python_module";
    case EntryKind::kBinary:
      return "binary";
    case EntryKind::kBundledTrainer:
      return "bundled_trainer";
  }
  return "unknown";
}

nlohmann::json launch_config_to_json(const LaunchConfig& config) {
  nlohmann::json json;
  json["min_nodes"] = config.min_nodes;
  json["max_nodes"] = config.max_nodes;
  json["nproc_per_node"] = config.nproc_per_node;
  json["rdzv_backend"] = config.rdzv_backend;
  json["rdzv_endpoint"] = config.rdzv_endpoint;
  json["rdzv_host"] = config.rdzv_host;
  json["rdzv_port"] = optional_json(config.rdzv_port);
  json["rdzv_id"] = config.rdzv_id;
  json["rdzv_conf"] = config.rdzv_conf;  // secret_file is a path, never the secret
  // Whether a secret is set and where from; the secret itself is never printed.
  json["rdzv_secret"] = config.rdzv_secret ? "set, from " + config.rdzv_secret->source
                                           : std::string("none (the rendezvous is open)");
  json["standalone"] = config.standalone;
  json["node_rank"] = config.node_rank;
  json["node_rank_hint"] = optional_json(config.node_rank_hint);
  json["master_addr"] = config.master_addr;
  json["master_port"] = config.master_port;
  json["local_addr"] = optional_json(config.local_addr);
  json["max_restarts"] = config.max_restarts;
  json["monitor_interval"] = config.monitor_interval.count();
  json["start_method"] = config.start_method;
  json["role"] = config.role;
  json["shutdown_timeout"] = config.shutdown_timeout.count();
  json["recovery"] = config.live_recovery ? "live" : "restart";
  json["exit_barrier_timeout"] = config.exit_barrier_timeout.count();
  json["signals_to_handle"] = config.signals_to_handle;
  json["signals_to_handle_text"] = config.signals_to_handle_text;
  json["virtual_local_rank"] = config.virtual_local_rank;
  json["log_dir"] = optional_json(config.logs.log_dir);
  json["redirects"] = streams_json(config.logs.redirects);
  json["tee"] = streams_json(config.logs.tee);
  json["local_ranks_filter"] = config.logs.local_ranks_filter;
  json["duplicate_stdout_filters"] = config.logs.duplicate_stdout_filters;
  json["duplicate_stderr_filters"] = config.logs.duplicate_stderr_filters;
  json["event_log_handler"] = config.event_log_handler;
  json["logs_specs"] = optional_json(config.logs_specs);
  json["numa_binding"] = optional_json(config.numa_binding);
  nlohmann::json numa_cpus = nlohmann::json::array();
  for (const auto& cpus : config.numa_cpus)
    numa_cpus.push_back(cpu_list_text(cpus));
  json["numa_cpus"] = numa_cpus;
  json["file_timer_enabled"] = config.file_timer_enabled;
  json["timer_file"] = optional_json(config.timer_file);
  json["use_libuv"] = config.use_libuv;
  json["health_check_port"] = optional_json(config.health_port);
  json["health_server_timeout"] = config.health_port_stale_after.count();
  json["job_page_stacks"] = config.job_page_stacks;
  json["health_check"] = optional_json(config.node_check_command);
  json["health_check_timeout"] = config.node_check_timeout.count();
  json["health_check_interval"] = config.node_check_interval.count();
  json["uninterruptible_state_timeout"] = config.uninterruptible_state_timeout.count();
  json["events_file"] = optional_json(config.events_file);
  json["watchdog_timeout"] =
      config.watchdog_timeout ? nlohmann::json(config.watchdog_timeout->count()) : nlohmann::json();
  json["straggler_factor"] = config.straggler_factor;
  json["straggler_window"] = config.straggler_window.count();
  json["entry_kind"] = entry_kind_name(config.entry_kind);
  json["run_path"] = config.run_path;
  json["entry_point"] = config.entry_point;
  json["entry_args"] = config.entry_args;
  json["worker_argv"] = config.worker_argv;
  json["worker_env_overrides"] = config.worker_env_overrides;
  json["value_sources"] = config.value_sources;
  return json;
}

}  // namespace ddprun::launcher
