#include "run_environment.hpp"

#include <charconv>
#include <stdexcept>

namespace ddprun::train {
namespace {

int64_t parse_int(const std::string& name, const std::string& text, int64_t low, int64_t high) {
  int64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || value < low || value > high) {
    throw std::invalid_argument("environment variable " + name + "='" + text +
                                "' must be an integer between " + std::to_string(low) + " and " +
                                std::to_string(high));
  }
  return value;
}

}  // namespace

RunEnvironment read_run_environment(const EnvLookup& lookup) {
  RunEnvironment env;
  const auto rank = lookup("RANK");
  const auto world = lookup("WORLD_SIZE");
  if (!rank && !world) {
    return env;
  }
  if (!rank || !world) {
    throw std::invalid_argument("RANK and WORLD_SIZE must be set together");
  }
  constexpr int64_t kMaxWorld = 1 << 20;
  env.world_size = parse_int("WORLD_SIZE", *world, 1, kMaxWorld);
  env.rank = parse_int("RANK", *rank, 0, env.world_size - 1);
  if (const auto local = lookup("LOCAL_RANK")) {
    env.local_rank = parse_int("LOCAL_RANK", *local, 0, kMaxWorld);
  }
  if (const auto addr = lookup("MASTER_ADDR"); addr && !addr->empty()) {
    env.master_addr = *addr;
  }
  if (const auto port = lookup("MASTER_PORT")) {
    env.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
  } else if (env.world_size > 1) {
    throw std::invalid_argument("MASTER_PORT must be set when WORLD_SIZE > 1");
  }
  if (const auto agent = lookup("TORCHELASTIC_USE_AGENT_STORE")) {
    env.use_agent_store = *agent == "True" || *agent == "true" || *agent == "1";
  }
  if (const auto restarts = lookup("TORCHELASTIC_RESTART_COUNT")) {
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", *restarts, 0, kMaxWorld);
  }
  if (const auto agent_metrics = lookup("DDPRUN_AGENT_METRICS")) {
    env.agent_metrics_path = *agent_metrics;
  }
  if (const auto ifname = lookup("GLOO_SOCKET_IFNAME")) {
    env.gloo_interface = *ifname;
  }
  if (const auto control = lookup("DDPRUN_LIVE_CONTROL"); control && !control->empty()) {
    env.live_control_path = *control;
    if (const auto wait = lookup("DDPRUN_LIVE_WAIT_SECONDS")) {
      env.live_wait_seconds = parse_int("DDPRUN_LIVE_WAIT_SECONDS", *wait, 1, 7 * 24 * 3600);
    }
  }
  return env;
}

std::string agent_store_prefix(const RunEnvironment& env) {
  return "/worker/attempt_" + std::to_string(env.restart_count);
}

}  // namespace ddprun::train
