#include "launcher/slurm_environment.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <string_view>

#include "common/text.hpp"
#include "launcher/hostlist.hpp"
#include "launcher/text.hpp"
#include "launcher/usage_error.hpp"

namespace ddprun::launcher {
namespace {

std::optional<int> env_int(const Environment& env, const std::string& name) {
  const auto text = lookup(env, name);
  return text ? common::parse_integer<int>(*text) : std::nullopt;
}

std::optional<std::string> non_empty(const Environment& env, const std::string& name) {
  auto text = lookup(env, name);
  if (text && text->empty())
    return std::nullopt;
  return text;
}

RawValue from_slurm(std::string text, const std::string& variable) {
  return RawValue{std::move(text), "slurm:" + variable, variable};
}

std::string short_name(std::string_view host) {
  return std::string(host.substr(0, host.find('.')));
}

bool names_a_node(const std::string& host, const std::vector<std::string>& hosts) {
  return std::any_of(hosts.begin(), hosts.end(), [&](const std::string& node) {
    return node == host || short_name(node) == short_name(host);
  });
}

bool is_ip_address(const std::string& host) {
  unsigned char buffer[16];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

std::string summarize(const std::vector<std::string>& hosts) {
  std::string text;
  const std::size_t shown = std::min<std::size_t>(hosts.size(), 4);
  for (std::size_t i = 0; i < shown; ++i)
    text += (i == 0 ? "" : ", ") + hosts[i];
  if (hosts.size() > shown)
    text += cat(", ... (", std::to_string(hosts.size()), " nodes)");
  return text;
}

// "VARIABLE=value" of the first variable that says more than one task runs on this node.
std::optional<std::string> several_tasks_evidence(const Environment& env) {
  if (auto per_node = env_int(env, "SLURM_NTASKS_PER_NODE"); per_node && *per_node > 1) {
    return cat("SLURM_NTASKS_PER_NODE=", std::to_string(*per_node));
  }
  for (const char* variable : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto text = lookup(env, variable)) {
      if (auto most = max_tasks_per_node(*text); most && *most > 1) {
        return std::string(variable) + "=" + *text;
      }
      break;  // the step's value, when present, overrides the job's
    }
  }
  const auto tasks = env_int(env, "SLURM_NTASKS");
  const auto nodes = env_int(env, "SLURM_NNODES");
  if (tasks && nodes && *nodes > 0 && *tasks > *nodes) {
    return cat("SLURM_NTASKS=", std::to_string(*tasks), " > SLURM_NNODES=", std::to_string(*nodes));
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> max_tasks_per_node(const std::string& tasks_per_node) {
  // Items are "N" or "N(xM)", comma-separated.
  int most = 0;
  std::string_view rest = tasks_per_node;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (const auto paren = item.find('('); paren != std::string_view::npos) {
      if (!item.ends_with(")") || item.substr(paren + 1, 1) != "x" ||
          !common::parse_integer<int>(item.substr(paren + 2, item.size() - paren - 3))) {
        return std::nullopt;
      }
      item = item.substr(0, paren);
    }
    const auto count = common::parse_integer<int>(item);
    if (!count)
      return std::nullopt;
    most = std::max(most, *count);
    if (comma == std::string_view::npos)
      break;
    rest.remove_prefix(comma + 1);
  }
  return most > 0 ? std::optional<int>(most) : std::nullopt;
}

std::optional<SlurmStep> read_slurm_step(const Environment& env) {
  const auto job_id = non_empty(env, "SLURM_JOB_ID");
  if (!job_id)
    return std::nullopt;
  SlurmStep step;
  std::optional<std::string> node_list;
  for (const char* variable : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if ((node_list = non_empty(env, variable))) {
      step.node_list_variable = variable;
      break;
    }
  }
  if (!node_list)
    return std::nullopt;

  const std::string expected = "a Slurm hostlist such as node[01-04,07],login1";
  try {
    step.hosts = expand_hostlist(*node_list);
  } catch (const HostlistError& error) {
    throw UsageError(step.node_list_variable, "'" + *node_list + "': " + error.what(), expected);
  }
  if (step.hosts.empty()) {
    throw UsageError(step.node_list_variable, "'" + *node_list + "' names no host", expected);
  }

  auto& defaults = step.defaults;
  defaults["rdzv_backend"] = from_slurm("c10d", "SLURM_JOB_ID");
  const auto step_id = non_empty(env, "SLURM_STEP_ID") ? non_empty(env, "SLURM_STEP_ID")
                                                       : non_empty(env, "SLURM_STEPID");
  defaults["rdzv_id"] = from_slurm(step_id ? *job_id + "." + *step_id : *job_id,
                                   step_id ? "SLURM_JOB_ID,SLURM_STEP_ID" : "SLURM_JOB_ID");
  const std::string& first = step.hosts.front();
  defaults["rdzv_endpoint"] =
      from_slurm(cat(first, ":", std::to_string(kSlurmRendezvousPort)), step.node_list_variable);
  defaults["master_addr"] = from_slurm(first, step.node_list_variable);
  defaults["nnodes"] = from_slurm(std::to_string(step.hosts.size()), step.node_list_variable);
  if (auto node_id = non_empty(env, "SLURM_NODEID")) {
    defaults["node_rank"] = from_slurm(*node_id, "SLURM_NODEID");
  }
  if (auto gpus = non_empty(env, "SLURM_GPUS_ON_NODE"); gpus && *gpus != "0") {
    defaults["nproc_per_node"] = from_slurm(*gpus, "SLURM_GPUS_ON_NODE");
  }
  if (auto node_name = non_empty(env, "SLURMD_NODENAME")) {
    defaults["local_addr"] = from_slurm(*node_name, "SLURMD_NODENAME");
  }
  return step;
}

std::vector<std::string> slurm_warnings(const SlurmStep& step, const Environment& env,
                                        const LaunchConfig& config) {
  std::vector<std::string> warnings;
  if (auto evidence = several_tasks_evidence(env)) {
    warnings.push_back(
        "Slurm runs more than one task on this node (" + *evidence +
        "); every ddprun starts its own workers and joins as a separate node. Fix: one ddprun "
        "per node (srun --ntasks-per-node=1, or sbatch --ntasks-per-node=1) and set the "
        "workers per node with --nproc-per-node.");
  }

  const std::string& host = config.rdzv_host;
  const bool checkable = !host.empty() && !config.standalone &&
                         (is_loopback(host) ? step.hosts.size() > 1 : !is_ip_address(host));
  if (checkable && !names_a_node(host, step.hosts)) {
    warnings.push_back(cat("the rendezvous host '", host, "' is not a node of this Slurm step (",
                           step.node_list_variable, ": ", summarize(step.hosts),
                           "); agents may wait for a store that never starts. Fix: leave out "
                           "--rdzv-endpoint (ddprun then uses ",
                           step.hosts.front(), ":", std::to_string(kSlurmRendezvousPort),
                           ") or name a node of the step."));
  }

  const auto nodes = static_cast<int>(step.hosts.size());
  if (nodes < config.min_nodes) {
    const std::string min = std::to_string(config.min_nodes);
    const std::string have = std::to_string(nodes);
    warnings.push_back(cat("--nnodes needs at least ", min, " nodes but this Slurm step spans ",
                           have, " (", step.node_list_variable,
                           "); the rendezvous would wait until it times out. Fix: srun -N ", min,
                           ", or --nnodes ", have, " (or MIN:MAX with MIN <= ", have, ")."));
  }
  return warnings;
}

}  // namespace ddprun::launcher
