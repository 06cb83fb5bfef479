#include "live_world.hpp"

#include <charconv>
#include <limits>
#include <map>
#include <sstream>

namespace ddprun::train {
namespace {

int64_t integer_field(const std::map<std::string, std::string>& fields, const std::string& key,
                      int64_t minimum, int64_t maximum) {
  const auto it = fields.find(key);
  if (it == fields.end()) {
    throw LiveControlError("live control: no '" + key + "'");
  }
  int64_t value = 0;
  const auto& text = it->second;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum ||
      value > maximum) {
    throw LiveControlError("live control: '" + key + "' is '" + text + "', not an integer in " +
                           std::to_string(minimum) + ".." + std::to_string(maximum));
  }
  return value;
}

}  // namespace

LiveWorld parse_live_control(std::string_view text) {
  if (text.size() > kMaxLiveControlBytes) {
    throw LiveControlError("live control: " + std::to_string(text.size()) + " bytes, more than " +
                           std::to_string(kMaxLiveControlBytes));
  }
  std::map<std::string, std::string> fields;
  std::istringstream lines{std::string(text)};
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    const auto space = line.find(' ');
    if (space == std::string::npos || space == 0) {
      throw LiveControlError("live control: malformed line '" + line + "'");
    }
    const std::string key = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    if (first && (key != "ddprun-live" || value != "1")) {
      throw LiveControlError("live control: does not start with 'ddprun-live 1'");
    }
    first = false;
    fields[key] = value;
  }
  if (first) {
    throw LiveControlError("live control: empty");
  }
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  LiveWorld world;
  world.generation = static_cast<uint64_t>(
      integer_field(fields, "generation", 0, std::numeric_limits<int64_t>::max()));
  const auto state = fields.find("state");
  if (state == fields.end() || (state->second != "running" && state->second != "reforming")) {
    throw LiveControlError("live control: 'state' is neither running nor reforming");
  }
  world.running = state->second == "running";
  if (!world.running) {
    return world;
  }
  world.base_rank = integer_field(fields, "base_rank", 0, kMaxInt);
  world.world_size = integer_field(fields, "world_size", 1, kMaxInt);
  world.master_port = integer_field(fields, "master_port", 1, 65535);
  world.restart_count = integer_field(fields, "restart_count", 0, kMaxInt);
  const auto addr = fields.find("master_addr");
  if (addr == fields.end() || addr->second.empty() || addr->second.size() > 255) {
    throw LiveControlError("live control: no usable 'master_addr'");
  }
  world.master_addr = addr->second;
  return world;
}

RunEnvironment environment_in(const RunEnvironment& start, const LiveWorld& world) {
  RunEnvironment env = start;
  env.rank = world.base_rank + start.local_rank;
  env.world_size = world.world_size;
  if (env.rank >= env.world_size) {
    throw LiveControlError("live control: rank " + std::to_string(env.rank) + " (base " +
                           std::to_string(world.base_rank) + " + local rank " +
                           std::to_string(start.local_rank) + ") outside a world of " +
                           std::to_string(world.world_size));
  }
  env.master_addr = world.master_addr;
  env.master_port = world.master_port;
  env.restart_count = world.restart_count;
  env.use_agent_store = true;
  return env;
}

}  // namespace ddprun::train
