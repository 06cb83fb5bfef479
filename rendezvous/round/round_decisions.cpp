#include "rendezvous/round/round_decisions.hpp"

#include <algorithm>

namespace ddprun::rendezvous::round {

FailureDecision decide_failure(int64_t restarts_after_increment, int max_restarts) {
  return restarts_after_increment <= max_restarts ? FailureDecision::kRestart
                                                  : FailureDecision::kExhausted;
}

std::string to_string(FailureDecision decision) {
  return decision == FailureDecision::kRestart ? "restart" : "exhausted";
}

std::optional<FailureDecision> parse_failure_decision(const std::string& text) {
  if (text == "restart") {
    return FailureDecision::kRestart;
  }
  if (text == "exhausted") {
    return FailureDecision::kExhausted;
  }
  return std::nullopt;
}

RoundSignal decide_round_signal(const WakeObservation& observation) {
  if (observation.failure) {
    return *observation.failure == FailureDecision::kRestart ? RoundSignal::kRestartRequested
                                                             : RoundSignal::kJobFailed;
  }
  if (observation.lost_nodes > 0) {
    return RoundSignal::kMembershipChange;
  }
  if (observation.waiting_nodes > 0 &&
      waiting_node_wakes_round(observation.participants, observation.max_nodes)) {
    return RoundSignal::kMembershipChange;
  }
  return RoundSignal::kNone;
}

int next_round_expected_nodes(int participants, int64_t lost_nodes, int64_t waiting_nodes,
                              int max_nodes) {
  const int64_t lost = std::clamp<int64_t>(lost_nodes, 0, participants);
  const int64_t waiting = std::clamp<int64_t>(waiting_nodes, 0, max_nodes);
  return static_cast<int>(std::clamp<int64_t>(participants - lost + waiting, 1, max_nodes));
}

bool waiting_node_wakes_round(int participants, int max_nodes) {
  return participants < max_nodes;
}

}  // namespace ddprun::rendezvous::round
