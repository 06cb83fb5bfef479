#include "agent/workers/worker_env.hpp"

#include <unistd.h>

#include <cctype>
#include <string_view>

#include "common/text.hpp"

namespace ddprun::agent {

namespace {

std::string inherited_or(const EnvMap& env, const std::string& name, const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() ? fallback : it->second;
}

// torchrun's _set_local_rank_env: the worker's one GPU, the local_rank-th entry of the agent's
// CUDA_VISIBLE_DEVICES (split on ',', blanks trimmed), or the local rank itself when unset.
// The launcher has checked that the list is long enough.
std::string virtual_local_rank_device(const EnvMap& inherited, int local_rank) {
  auto it = inherited.find("CUDA_VISIBLE_DEVICES");
  if (it == inherited.end())
    return std::to_string(local_rank);
  std::string_view rest = it->second;
  for (int entry = 0; entry < local_rank && !rest.empty(); ++entry) {
    const auto comma = rest.find(',');
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return std::string(common::trim(rest.substr(0, rest.find(','))));
}

// Credentials the agent has already used. Workers speak only to their round's store, which has
// no authentication, so a worker (or whatever it runs, or a core dump of it) has no use for them.
// ddprun's launcher takes them out of its own environment before any child exists
// (launcher/credentials.hpp); they are dropped here too, for agents started another way.
constexpr std::string_view kAgentOnlySecrets[] = {"DDPRUN_RDZV_SECRET", "DDPRUN_ETCD_PASSWORD"};

}  // namespace

EnvMap build_worker_env(const WorkerSpec& workers, const NodeShape& shape, const RoundInfo& round,
                        const WorkerEnvInputs& inputs) {
  EnvMap env = inputs.inherited;
  for (const auto& [name, value] : workers.env_overrides)
    env[name] = value;
  for (const auto name : kAgentOnlySecrets)
    env.erase(std::string(name));

  const int local_rank = inputs.local_rank;
  const int global_rank = round.base_global_rank + local_rank;
  env["LOCAL_RANK"] = std::to_string(workers.virtual_local_rank ? 0 : local_rank);
  if (workers.virtual_local_rank)
    env["CUDA_VISIBLE_DEVICES"] = virtual_local_rank_device(inputs.inherited, local_rank);
  env["RANK"] = std::to_string(global_rank);
  env["GROUP_RANK"] = std::to_string(round.group_rank);
  // A single role per job, so role ranks are global ranks (torchrun's behaviour as well).
  env["ROLE_RANK"] = std::to_string(global_rank);
  env["ROLE_NAME"] = workers.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(shape.nproc_per_node);
  env["WORLD_SIZE"] = std::to_string(round.world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(round.group_world_size);
  env["ROLE_WORLD_SIZE"] = std::to_string(round.world_size);
  env["MASTER_ADDR"] = round.master_addr;
  env["MASTER_PORT"] = std::to_string(round.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(round.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(shape.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = round.run_id;
  // Every worker is a client of the round's store; its keys are fresh for each round.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["TORCHELASTIC_ERROR_FILE"] = inputs.error_file;
  // torchrun 2.x sets only the TORCH_ name: PyTorch >= 2.2 warns on every rank when the
  // pre-2.2 NCCL_ASYNC_ERROR_HANDLING is set, so that one is only passed on when inherited (and
  // then also decides the TORCH_ one's default, so a job's explicit choice holds).
  env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = inherited_or(
      env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", inherited_or(env, "NCCL_ASYNC_ERROR_HANDLING", "1"));
  // torchrun's config_from_args: unset and more than one worker per node -> 1 thread each.
  // (try_emplace: only when absent; it also sidesteps a GCC 12 -Wrestrict false positive.)
  if (shape.nproc_per_node > 1)
    env.try_emplace("OMP_NUM_THREADS", "1");
  env.try_emplace("TORCHELASTIC_SIGNALS_TO_HANDLE", workers.signals_to_handle_text);
  return env;
}

EnvMap current_process_env() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    auto eq = text.find('=');
    if (eq == std::string::npos)
      continue;
    env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return env;
}

}  // namespace ddprun::agent
