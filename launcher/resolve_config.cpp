#include "launcher/resolve_config.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <tuple>

#include "common/signals.hpp"
#include "common/text.hpp"
#include "launcher/entry_point.hpp"
#include "launcher/gpu_visibility.hpp"
#include "launcher/numa_binding.hpp"
#include "launcher/option_table.hpp"
#include "launcher/slurm_environment.hpp"
#include "launcher/text.hpp"
#include "launcher/usage_error.hpp"
#include "launcher/value_parsers.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/store/job_secret.hpp"

namespace ddprun::launcher {
namespace {

constexpr int kMaxWorkersPerNode = 4096;  // far above any real node; stops fork bombs by typo
constexpr uint16_t kC10dDefaultPort = 29400;

// Looks up each option through the layers and records where its value came from.
class OptionValues {
 public:
  OptionValues(const ParsedCommandLine& parsed, const SlurmStep* slurm, LaunchConfig& config)
      : parsed_(parsed), slurm_(slurm), config_(config) {}

  // The raw value of `dest`, or nothing (torchrun's default applies; recorded as "default").
  std::optional<RawValue> get(const std::string& dest) {
    std::optional<RawValue> value;
    if (auto it = parsed_.values.find(dest); it != parsed_.values.end()) {
      value = it->second;
    } else if (slurm_ != nullptr && use_slurm_) {
      if (auto found = slurm_->defaults.find(dest); found != slurm_->defaults.end()) {
        value = found->second;
      }
    }
    config_.value_sources[dest] = value ? value->source : "default";
    return value;
  }

  bool flag(const std::string& dest) {
    const auto value = get(dest);
    if (!value)
      return false;
    return value->source == "cli" || parse_env_flag(value->text, label(dest, *value));
  }

  void override_source(const std::string& dest, const std::string& source) {
    config_.value_sources[dest] = source;
  }

  // Slurm's endpoint and master address only make sense for the backend they were made for.
  void ignore_slurm(bool ignore) { use_slurm_ = !ignore; }

  // How messages name the option: the spelling typed, or the option and its variable.
  static std::string label(const std::string& dest, const RawValue& value) {
    if (value.source == "cli")
      return value.shown_as;
    const OptionSpec* spec = find_option(dest);
    return (spec ? display_name(*spec) : dest) + " (from " + value.shown_as + ")";
  }

 private:
  const ParsedCommandLine& parsed_;
  const SlurmStep* slurm_;
  LaunchConfig& config_;
  bool use_slurm_ = true;
};

int resolve_nproc(const RawValue& value, const std::string& option, const Environment& env,
                  const HostFacts& facts) {
  const std::string expected =
      "a number of workers from 1 to " + std::to_string(kMaxWorkersPerNode) + ", cpu, gpu or auto";
  const int gpus = visible_gpu_count(facts.nvidia_gpu_count, lookup(env, "CUDA_VISIBLE_DEVICES"));
  if (value.text == "cpu")
    return std::min(facts.cpu_count, kMaxWorkersPerNode);
  if (value.text == "auto")
    return std::min(gpus > 0 ? gpus : facts.cpu_count, kMaxWorkersPerNode);
  if (value.text == "gpu") {
    if (gpus == 0) {
      const auto visible = lookup(env, "CUDA_VISIBLE_DEVICES");
      throw UsageError(option,
                       "gpu asks for one worker per GPU but no NVIDIA GPU is visible (" +
                           std::to_string(facts.nvidia_gpu_count) + " found" +
                           (visible ? ", CUDA_VISIBLE_DEVICES='" + *visible + "'" : "") + ")",
                       "a machine with NVIDIA GPUs, or a number, cpu or auto");
    }
    return gpus;
  }
  if (value.text == "xpu") {
    throw UsageError(option, "xpu devices are not supported by ddprun", expected);
  }
  return parse_int(value.text, option, expected, 1, kMaxWorkersPerNode);
}

std::string check_choice(const RawValue& value, const std::string& option,
                         std::initializer_list<const char*> choices) {
  std::string expected;
  for (const char* choice : choices) {
    if (value.text == choice)
      return value.text;
    expected += cat(expected.empty() ? "" : "|", choice);
  }
  throw UsageError(option, "'" + value.text + "' is not a valid choice", expected);
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items)
    text += (text.empty() ? "" : ",") + item;
  return text;
}

// torchrun's LocalElasticAgent._set_local_rank_env: local rank N gets the Nth entry of the
// agent's CUDA_VISIBLE_DEVICES (a plain split on ','), or device N when it is unset.
void check_virtual_local_ranks(int nproc_per_node, const std::optional<std::string>& visible) {
  if (!visible)
    return;
  const auto entries = static_cast<int>(std::count(visible->begin(), visible->end(), ',')) + 1;
  if (nproc_per_node > entries) {
    throw UsageError(
        "--virtual-local-rank",
        cat("local rank ", std::to_string(entries), " has no device in CUDA_VISIBLE_DEVICES='",
            *visible, "' (", std::to_string(entries), " entries for ",
            std::to_string(nproc_per_node), " workers)"),
        "at most one worker per CUDA_VISIBLE_DEVICES entry");
  }
}

// Whether --tee covers `bit` (1 stdout, 2 stderr) for at least one local rank.
bool tees_stream(const StdStreams& tee, int nproc_per_node, int bit) {
  for (int local_rank = 0; local_rank < nproc_per_node; ++local_rank) {
    if ((tee.for_local_rank(local_rank) & bit) != 0)
      return true;
  }
  return false;
}

// The job secret, from --rdzv_conf secret_file, DDPRUN_RDZV_SECRET_FILE or DDPRUN_RDZV_SECRET.
// The variable's value is looked at in place, not copied: the launcher wipes it there.
std::optional<rendezvous::store::JobSecret> resolve_secret(
    const std::map<std::string, std::string>& rdzv_conf, const Environment& env) {
  const auto file = rdzv_conf.find("secret_file");
  const auto variable = env.find(rendezvous::store::kSecretVariable);
  try {
    return rendezvous::store::resolve_job_secret(
        file == rdzv_conf.end() ? std::nullopt : std::optional<std::string>(file->second),
        "--rdzv_conf secret_file", lookup(env, rendezvous::store::kSecretFileVariable),
        variable == env.end() ? std::nullopt : std::optional<std::string_view>(variable->second));
  } catch (const rendezvous::store::JobSecretError& error) {
    throw UsageError(error.where(), error.problem(), rendezvous::store::kSecretExpectation);
  }
}

// The variables torchrun's agent reads besides PET_*: the file-timer watchdog, USE_LIBUV, the
// health-check port (with ddprun's timeout for it) and the uninterruptible-state timeout.
void resolve_torchelastic_environment(const Environment& env, LaunchConfig& config) {
  const auto enabled = lookup(env, "TORCHELASTIC_ENABLE_FILE_TIMER");
  config.file_timer_enabled = enabled && *enabled == "1";  // torchrun: str(value) == "1"
  config.value_sources["file_timer_enabled"] =
      enabled ? "env:TORCHELASTIC_ENABLE_FILE_TIMER" : "default";
  // torchrun passes a given path on to the workers, enabled or not.
  config.timer_file = lookup(env, "TORCHELASTIC_TIMER_FILE");
  config.value_sources["timer_file"] =
      config.timer_file ? "env:TORCHELASTIC_TIMER_FILE" : "default";
  const auto libuv = lookup(env, "USE_LIBUV");
  config.use_libuv = libuv.value_or("1") == "1";
  config.value_sources["use_libuv"] = libuv ? "env:USE_LIBUV" : "default";
  // torchrun logs a port that is not an integer and goes on without a server; a health check
  // asked for and not served would only show as a dead node later, so here it is an error.
  const auto health_port = lookup(env, "TORCHELASTIC_HEALTH_CHECK_PORT");
  if (health_port) {
    config.health_port = static_cast<uint16_t>(parse_int(
        *health_port, "TORCHELASTIC_HEALTH_CHECK_PORT", "a TCP port from 1 to 65535", 1, 65535));
  }
  config.value_sources["health_check_port"] =
      health_port ? "env:TORCHELASTIC_HEALTH_CHECK_PORT" : "default";
  const auto health_timeout = lookup(env, "DDPRUN_HEALTH_CHECK_TIMEOUT");
  if (health_timeout) {
    config.health_port_stale_after =
        seconds_option(*health_timeout, "DDPRUN_HEALTH_CHECK_TIMEOUT", /*positive=*/true);
  }
  config.value_sources["health_server_timeout"] =
      health_timeout ? "env:DDPRUN_HEALTH_CHECK_TIMEOUT" : "default";
  // The job page's stacks button: always with a job secret (the page needs its token); without
  // one the page is open to whoever reaches the port, so capturing stacks from it is asked for.
  const auto page_stacks = lookup(env, "DDPRUN_JOB_PAGE_STACKS");
  if (page_stacks) {
    if (*page_stacks != "0" && *page_stacks != "1")
      throw UsageError("DDPRUN_JOB_PAGE_STACKS", "'" + *page_stacks + "' is not 0 or 1", "0 or 1");
    config.job_page_stacks = *page_stacks == "1";
  }
  config.value_sources["job_page_stacks"] = page_stacks ? "env:DDPRUN_JOB_PAGE_STACKS" : "default";
  // torchrun: empty or 0 turns its D-state check off; here they keep the default bound, since
  // waiting without one for a worker SIGKILL cannot end is the hang this bound prevents.
  const auto stuck_limit = lookup(env, "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT");
  const bool stuck_limit_given = stuck_limit && !stuck_limit->empty();
  if (stuck_limit_given) {
    const common::Seconds limit = seconds_option(
        *stuck_limit, "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", /*positive=*/false);
    if (limit > common::Seconds::zero())
      config.uninterruptible_state_timeout = limit;
  }
  config.value_sources["uninterruptible_state_timeout"] =
      stuck_limit_given ? "env:TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT" : "default";
}

}  // namespace

std::string omp_num_threads_warning() {
  return "\n*****************************************\n"
         "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
         "avoid your system being overloaded, please further tune the variable for optimal "
         "performance in your application as needed. \n"
         "*****************************************";
}

namespace {

// How a message names an option: as given (--flag, PET_*, Slurm).
std::string label(const std::string& dest, const RawValue& value) {
  return OptionValues::label(dest, value);
}

// The rendezvous endpoint's members, for etcd: EtcdOptionError names the option at fault.
void resolve_etcd_endpoint(const std::optional<RawValue>& endpoint, LaunchConfig& config) {
  const std::string option =
      endpoint ? label("rdzv_endpoint", *endpoint) : std::string("--rdzv_endpoint");
  if (!endpoint || endpoint->text.empty()) {
    throw UsageError(option, "the etcd backend needs the etcd members",
                     "HOST:PORT[,HOST:PORT...] (etcd's client port is 2379 by default)");
  }
  try {
    config.etcd = rendezvous::backends::etcd::etcd_options_from_command_line(endpoint->text,
                                                                             config.rdzv_conf);
  } catch (const rendezvous::backends::etcd::EtcdOptionError& error) {
    throw UsageError(error.option() == "rdzv_endpoint" ? option : "--rdzv_conf",
                     error.option() == "rdzv_endpoint" ? error.problem() : error.what(),
                     "etcd members as HOST:PORT[,HOST:PORT...] and etcd's --rdzv_conf keys "
                     "protocol=http|https, cacert, cert, key, etcd_prefix, user, password_file, "
                     "insecure_auth");
  }
  config.rdzv_endpoint = endpoint->text;
  config.rdzv_host = config.etcd->endpoints.front().host;
  config.rdzv_port = config.etcd->endpoints.front().port;
}

// --nnodes and --nproc-per-node.
void resolve_nodes(OptionValues& values, const Environment& env, const HostFacts& facts,
                   LaunchConfig& config) {
  if (auto v = values.get("nnodes")) {
    const NodeRange range = parse_nnodes(v->text, label("nnodes", *v));
    config.min_nodes = range.min;
    config.max_nodes = range.max;
  }
  if (auto v = values.get("nproc_per_node")) {
    config.nproc_per_node = resolve_nproc(*v, label("nproc_per_node", *v), env, facts);
  }
}

// The rendezvous options; returns --rdzv-endpoint as given (Slurm's default is only c10d's).
std::optional<RawValue> resolve_rendezvous_options(OptionValues& values, const Environment& env,
                                                   LaunchConfig& config) {
  const int int_max = std::numeric_limits<int>::max();
  config.standalone = values.flag("standalone");
  if (auto v = values.get("rdzv_backend")) {
    config.rdzv_backend = check_choice(*v, label("rdzv_backend", *v),
                                       {"static", "c10d", "etcd", "etcd-v2", "etcd-v3"});
    // torchrun's two etcd backends are one here: both speak etcd's v3 API.
    if (config.rdzv_backend.starts_with("etcd"))
      config.rdzv_backend = "etcd";
  }
  const bool is_static = config.rdzv_backend == "static" && !config.standalone;
  const bool is_etcd = config.rdzv_backend == "etcd" && !config.standalone;
  // Slurm's default endpoint is the first node's store port: neither static's nor etcd's.
  values.ignore_slurm(is_static || is_etcd);
  std::optional<RawValue> endpoint = values.get("rdzv_endpoint");
  values.ignore_slurm(false);
  if (auto v = values.get("rdzv_id"))
    config.rdzv_id = v->text;
  if (auto v = values.get("rdzv_conf")) {
    config.rdzv_conf = parse_rdzv_conf(v->text, label("rdzv_conf", *v));
    config.rdzv_settings =
        check_rdzv_conf_values(config.rdzv_conf, label("rdzv_conf", *v), is_static);
  }
  config.rdzv_secret = resolve_secret(config.rdzv_conf, env);
  config.value_sources["rdzv_secret"] =
      config.rdzv_secret ? config.rdzv_secret->source : std::string("none");
  if (auto v = values.get("master_addr")) {
    if (v->text.empty()) {
      throw UsageError(label("master_addr", *v), "empty", "a host name or address");
    }
    config.master_addr = v->text;
  }
  if (auto v = values.get("master_port")) {
    config.master_port = static_cast<uint16_t>(
        parse_int(v->text, label("master_port", *v), "a port number 0-65535", 0, 65535));
  }
  if (auto v = values.get("node_rank")) {
    config.node_rank =
        parse_int(v->text, label("node_rank", *v), "an integer, 0 or more", 0, int_max);
    config.node_rank_hint = config.node_rank;
    if (is_static && config.node_rank >= config.max_nodes) {
      throw UsageError(label("node_rank", *v),
                       std::to_string(config.node_rank) + " is not below --nnodes " +
                           std::to_string(config.max_nodes),
                       cat("a rank from 0 to ", std::to_string(config.max_nodes - 1)));
    }
  }
  if (auto v = values.get("local_addr"); v && !v->text.empty())
    config.local_addr = v->text;

  return endpoint;
}

// Where the rendezvous is: standalone's own store, etcd's members, c10d's or static's store.
void resolve_endpoint(const std::optional<RawValue>& endpoint, const HostFacts& facts,
                      OptionValues& values, ResolvedLaunch& resolved) {
  LaunchConfig& config = resolved.config;
  const bool is_static = config.rdzv_backend == "static" && !config.standalone;
  const bool is_etcd = config.rdzv_backend == "etcd" && !config.standalone;
  if (config.standalone) {
    config.rdzv_backend = "c10d";
    config.rdzv_endpoint = "localhost:0";
    config.rdzv_id = facts.fresh_run_id;
    config.rdzv_host = "localhost";
    config.rdzv_port = 0;
    for (const char* dest : {"rdzv_backend", "rdzv_endpoint", "rdzv_id"}) {
      values.override_source(dest, "standalone");
    }
  } else if (is_etcd) {
    resolve_etcd_endpoint(endpoint, config);
  } else if (endpoint && !endpoint->text.empty()) {
    const std::string option = label("rdzv_endpoint", *endpoint);
    const Endpoint parsed_endpoint = parse_endpoint(endpoint->text, option);
    config.rdzv_endpoint = endpoint->text;
    config.rdzv_host = parsed_endpoint.host;
    config.rdzv_port = parsed_endpoint.port;
    if (!config.rdzv_port) {
      if (is_static) {
        throw UsageError(option, "static rendezvous needs a port", "HOST:PORT");
      }
      config.rdzv_port = kC10dDefaultPort;
    }
  } else if (is_static) {
    config.rdzv_host = config.master_addr;
    config.rdzv_port = config.master_port;
  } else {
    // rendezvous/utils.py: an empty endpoint means localhost at the backend's default port.
    config.rdzv_host = "localhost";
    config.rdzv_port = kC10dDefaultPort;
    resolved.warnings.push_back(
        "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not "
        "specified.");
  }
}

// Restarts, timeouts, watchdogs, node checks, signals: the workers' lifecycle.
void resolve_worker_lifecycle(OptionValues& values, const Environment& env, LaunchConfig& config) {
  const int int_max = std::numeric_limits<int>::max();
  if (auto v = values.get("max_restarts")) {
    config.max_restarts =
        parse_int(v->text, label("max_restarts", *v), "an integer, 0 or more", 0, int_max);
  }
  if (auto v = values.get("monitor_interval")) {
    config.monitor_interval = seconds_option(v->text, label("monitor_interval", *v), true);
  }
  if (auto v = values.get("start_method")) {
    config.start_method =
        check_choice(*v, label("start_method", *v), {"spawn", "fork", "forkserver"});
  }
  if (auto v = values.get("role")) {
    if (v->text.empty())
      throw UsageError(label("role", *v), "empty", "a role name");
    config.role = v->text;
  }
  if (auto v = values.get("recovery")) {
    config.live_recovery = check_choice(*v, label("recovery", *v), {"restart", "live"}) == "live";
  }
  if (auto v = values.get("shutdown_timeout")) {
    config.shutdown_timeout = seconds_option(v->text, label("shutdown_timeout", *v), false);
  } else if (auto legacy = lookup(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT")) {
    config.shutdown_timeout =
        seconds_option(*legacy, "--shutdown-timeout (from TORCH_ELASTIC_SHUTDOWN_TIMEOUT)", false);
    values.override_source("shutdown_timeout", "env:TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  }
  if (auto v = values.get("watchdog_timeout")) {
    config.watchdog_timeout = seconds_option(v->text, label("watchdog_timeout", *v), true);
  }
  if (auto v = values.get("straggler_factor")) {
    config.straggler_factor = parse_straggler_factor(v->text, label("straggler_factor", *v));
  }
  if (auto v = values.get("straggler_window")) {
    config.straggler_window = seconds_option(v->text, label("straggler_window", *v), true);
  }
  if (auto v = values.get("health_check")) {
    if (common::trim(v->text).empty())
      throw UsageError(label("health_check", *v), "empty",
                       "a shell command (`true`: built-ins only)");
    config.node_check_command = v->text;
  }
  if (auto v = values.get("health_check_timeout")) {
    config.node_check_timeout = seconds_option(v->text, label("health_check_timeout", *v), true);
  }
  if (auto v = values.get("health_check_interval")) {
    config.node_check_interval = seconds_option(v->text, label("health_check_interval", *v), true);
  }
  if (auto v = values.get("exit_barrier_timeout")) {
    config.exit_barrier_timeout = seconds_option(v->text, label("exit_barrier_timeout", *v), false);
  }
  {
    auto v = values.get("signals_to_handle");
    const std::string text = v ? v->text : config.signals_to_handle_text;
    config.signals_to_handle =
        parse_signal_names(text, v ? label("signals_to_handle", *v) : "--signals-to-handle");
    std::vector<std::string> names;
    for (int number : config.signals_to_handle) {
      names.push_back(common::signal_name(number));
    }
    config.signals_to_handle_text = join(names);
  }
  config.virtual_local_rank = values.flag("virtual_local_rank");
  if (config.virtual_local_rank) {
    check_virtual_local_ranks(config.nproc_per_node, lookup(env, "CUDA_VISIBLE_DEVICES"));
  }
}

// Where the workers' output goes, and the other files and bindings of the run.
void resolve_logs(OptionValues& values, const Environment& env, const HostFacts& facts,
                  ResolvedLaunch& resolved) {
  LaunchConfig& config = resolved.config;
  if (auto v = values.get("log_dir"); v && !v->text.empty())
    config.logs.log_dir = v->text;
  if (auto v = values.get("redirects")) {
    config.logs.redirects = parse_std_streams(v->text, label("redirects", *v));
  }
  if (auto v = values.get("tee"))
    config.logs.tee = parse_std_streams(v->text, label("tee", *v));
  if (auto v = values.get("local_ranks_filter")) {
    config.logs.local_ranks_filter = parse_local_ranks(v->text, label("local_ranks_filter", *v));
  }
  for (const auto& [dest, filters, bit, stream] :
       {std::tuple{"duplicate_stdout_filters", &config.logs.duplicate_stdout_filters, 1, "stdout"},
        std::tuple{"duplicate_stderr_filters", &config.logs.duplicate_stderr_filters, 2,
                   "stderr"}}) {
    auto v = values.get(dest);
    if (!v)
      continue;
    *filters = parse_filter_list(v->text);
    if (filters->empty())
      continue;
    if (config.logs.log_dir && *config.logs.log_dir == "/dev/null") {
      throw UsageError(label(dest, *v),
                       cat("copies lines to <log dir>/<run>/attempt_<n>/filtered_", stream,
                           ".log, but --log-dir /dev/null turns log files off"),
                       cat("a --log-dir that is a directory, or no ", label(dest, *v)));
    }
    if (!tees_stream(config.logs.tee, config.nproc_per_node, bit)) {
      resolved.warnings.push_back(cat(label(dest, *v), " copies lines of --tee'd ", stream,
                                      " only, and --tee does not include ", stream,
                                      ": nothing will be copied"));
    }
  }
  if (auto v = values.get("event_log_handler"))
    config.event_log_handler = v->text;
  if (auto v = values.get("logs_specs"))
    config.logs_specs = parse_logs_specs(v->text, label("logs_specs", *v));
  if (auto pet = lookup(env, "PET_LOGS_SPECS"); pet && !pet->empty() && *pet != "default") {
    // torchrun 2.13 reads no PET_LOGS_SPECS (its --logs-specs has no env action) and starts
    // the job with its default layout; so does ddprun, but it says so.
    resolved.warnings.push_back(
        cat("PET_LOGS_SPECS='", *pet,
            "' is not read (torchrun does not read it either), and ddprun cannot load Python "
            "log-spec plugins: the logs keep torchrun's default layout (--log-dir, --redirects, "
            "--tee, --local-ranks-filter and the duplicate filters shape it)"));
  }
  if (auto v = values.get("numa_binding")) {
    config.numa_binding = check_choice(*v, label("numa_binding", *v),
                                       {"node", "socket", "exclusive", "core-complex"});
    config.numa_cpus =
        plan_numa_binding(facts.numa.value_or(NumaTopology{}), *config.numa_binding,
                          config.nproc_per_node, lookup(env, "CUDA_VISIBLE_DEVICES"));
  }
  if (auto v = values.get("events_file")) {
    if (v->text.empty())
      throw UsageError(label("events_file", *v), "empty", "a file path");
    config.events_file = v->text;
  }
}

// What each worker runs.
void resolve_entry_point(const ParsedCommandLine& parsed, OptionValues& values,
                         const Environment& env, const HostFacts& facts, LaunchConfig& config) {
  EntryPointRequest request;
  request.module = values.flag("module");
  request.no_python = values.flag("no_python");
  request.run_path = values.flag("run_path");
  if (!parsed.entry_point) {
    throw UsageError("training_script", "missing",
                     "a script, -m MODULE, --no-python PROGRAM or train, then its arguments");
  }
  request.entry_point = *parsed.entry_point;
  request.args = parsed.entry_args;
  request.python_exec = lookup(env, "PYTHON_EXEC");
  request.python3_on_path = facts.python3_on_path;
  request.executable_dir = facts.executable_dir;
  EntryPlan plan = plan_entry_point(request);
  config.entry_kind = plan.kind;
  config.run_path = request.run_path;
  config.entry_point = request.entry_point;
  config.entry_args = request.args;
  config.worker_argv = std::move(plan.worker_argv);
}

}  // namespace

ResolvedLaunch resolve_launch(const ParsedCommandLine& parsed, const Environment& env,
                              const HostFacts& facts) {
  ResolvedLaunch resolved;
  LaunchConfig& config = resolved.config;
  const std::optional<SlurmStep> slurm = read_slurm_step(env);
  OptionValues values(parsed, slurm ? &*slurm : nullptr, config);
  resolve_nodes(values, env, facts, config);
  const auto endpoint = resolve_rendezvous_options(values, env, config);
  resolve_endpoint(endpoint, facts, values, resolved);
  resolve_worker_lifecycle(values, env, config);
  resolve_logs(values, env, facts, resolved);
  resolve_torchelastic_environment(env, config);
  resolve_entry_point(parsed, values, env, facts, config);

  if (config.live_recovery && config.entry_kind != agent::EntryKind::kBundledTrainer) {
    resolved.warnings.push_back(
        "--recovery live: " + config.entry_point +
        " is not ddprun's trainer; its workers take part only if they follow the live-recovery "
        "protocol (README, \"Live recovery\"), and those that do not are restarted on a lost "
        "or joining node as with --recovery restart");
  }

  // torchrun's rule: several workers on a node would each start a full OpenMP pool.
  if (!env.contains("OMP_NUM_THREADS") && config.nproc_per_node > 1) {
    config.worker_env_overrides["OMP_NUM_THREADS"] = "1";
    resolved.warnings.push_back(omp_num_threads_warning());
  }

  if (slurm) {
    for (auto& warning : slurm_warnings(*slurm, env, config)) {
      resolved.warnings.push_back(std::move(warning));
    }
  }
  return resolved;
}

}  // namespace ddprun::launcher
