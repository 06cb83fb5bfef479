#include "agent/health/job_api.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "agent/stacks/stacks_answer.hpp"

namespace ddprun::agent {
namespace {

using nlohmann::json;

json job_fields(const HealthState& state) {
  return {{"run_id", state.job.run_id},
          {"backend", state.job.backend},
          {"round", state.round ? json(*state.round) : json()},
          {"world_size", state.world_size},
          {"nodes",
           {{"min", state.job.min_nodes},
            {"max", state.job.max_nodes},
            {"now", state.group_world_size}}},
          {"restarts", state.restarts},
          {"max_restarts", state.max_restarts}};
}

json node_fields(const NodeView& node) {
  if (!node.record)
    return {{"group_rank", node.group_rank}, {"problem", node.problem}};
  json fields = node_record_json(*node.record);
  fields["group_rank"] = node.group_rank;  // its key says which node it is
  return fields;
}

const char* phase_name(PageStacksState::Phase phase) {
  switch (phase) {
    case PageStacksState::Phase::kNone:
      return "none";
    case PageStacksState::Phase::kCapturing:
      return "capturing";
    case PageStacksState::Phase::kDone:
      return "done";
    case PageStacksState::Phase::kFailed:
      return "failed";
  }
  return "none";
}

json answer_fields(int group_rank, const std::string& text) {
  if (text.empty())
    return {{"group_rank", group_rank}, {"problem", "no answer in time"}};
  try {
    const StacksAnswer answer = stacks_answer_from_json(text);
    json stacks = json::object();
    for (const auto& [rank, stack] : answer.stacks)
      stacks[std::to_string(rank)] = stack;
    return {{"group_rank", group_rank},
            {"host", answer.host},
            {"stacks_dir", answer.stacks_dir},
            {"ranks", answer.ranks},
            {"stacks", stacks}};
  } catch (const std::invalid_argument& error) {
    return {{"group_rank", group_rank},
            {"problem", std::string("unreadable answer: ") + error.what()}};
  }
}

}  // namespace

std::string stacks_state_json(const PageStacksState& state, bool enabled) {
  json nodes = json::array();
  for (std::size_t g = 0; g < state.answers.size(); ++g)
    nodes.push_back(answer_fields(static_cast<int>(g), state.answers[g]));
  const json body = {{"enabled", enabled},
                     {"phase", phase_name(state.phase)},
                     {"request", state.request},
                     {"problem", state.problem},
                     {"nodes", nodes}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string job_state_json(const HealthState& state, const std::vector<NodeView>& nodes,
                           const std::deque<std::string>& events, const json& trainer) {
  json node_list = json::array();
  for (const auto& node : nodes)
    node_list.push_back(node_fields(node));
  json recent = json::array();
  for (const auto& line : events) {
    json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object())
      recent.push_back(std::move(event));
  }
  const json body = {
      {"job", job_fields(state)}, {"nodes", node_list}, {"events", recent}, {"trainer", trainer}};
  // Invalid UTF-8 (a node name is bytes) is replaced, never an exception.
  return body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ddprun::agent
