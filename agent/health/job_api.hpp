#pragma once
// The job page's JSON API (/job/api/state), as a pure function of what the agents published.
// The page (job_page_html.cpp) uses nothing else. Every string in it is data for the page to
// show as text: node names come from an untrusted store.
//
// {"job": {"run_id", "backend", "round", "world_size", "nodes": {"min", "max", "now"},
//          "restarts", "max_restarts"},
//  "nodes": [{"group_rank", "host", "alive", "last_progress_unix", "restarts", "node_check",
//             "ranks": [{"rank", "local_rank", "pid", "state", "steps", "step_interval_s",
//                        "straggler", "step_series": [seconds or null, ...]}]}
//            or {"group_rank", "problem"} for a node whose record is missing or unreadable],
//  "events": [{"time", "event", "node", ...}, ...],   (this agent's, oldest first)
//  "trainer": the bundled trainer's curves and last snapshot (trainer_progress.hpp), or null}

#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/health/health_board.hpp"
#include "agent/health/node_record.hpp"

namespace ddprun::agent {

// One node of the round as the page shows it.
struct NodeView {
  int group_rank = 0;
  std::optional<NodeRecord> record;
  std::string problem;  // without a record: why ("no record yet", or what is wrong with it)
};

// trainer: trainer_progress.hpp's object when the bundled trainer's rank 0 runs here, else null.
std::string job_state_json(const HealthState& state, const std::vector<NodeView>& nodes,
                           const std::deque<std::string>& events,
                           const nlohmann::json& trainer = nullptr);

// /job/api/stacks: {"enabled", "phase": "none"|"capturing"|"done"|"failed", "request",
//  "problem", "nodes": [{"group_rank", "host", "stacks_dir", "ranks", "stacks": {"<rank>": text}}
//  or {"group_rank", "problem"}]}; each answer validated as it came from the store.
std::string stacks_state_json(const PageStacksState& state, bool enabled);

}  // namespace ddprun::agent
