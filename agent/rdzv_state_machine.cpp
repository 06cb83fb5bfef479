#include "agent/rdzv_state_machine.hpp"

#include <algorithm>

namespace ddprun::agent::rdzv {

JoinStateMachine::JoinStateMachine(JoinPolicy policy, double join_deadline_s)
    : policy_(policy), join_deadline_s_(join_deadline_s) {}

int JoinStateMachine::close_target() const {
  const int wanted = policy_.expected_nodes > 0 ? policy_.expected_nodes : policy_.max_nodes;
  return std::clamp(wanted, policy_.min_nodes, policy_.max_nodes);
}

JoinAction JoinStateMachine::on_joined(int slot, double now_s) {
  slot_ = slot;
  if (slot > policy_.max_nodes) {
    // The node holding slot max_nodes closes the round; wait to learn the count.
    phase_ = Phase::kOverMax;
    return AwaitClose{join_deadline_s_};
  }
  if (slot == close_target()) {
    phase_ = Phase::kClosing;
    return CloseRound{slot};
  }
  if (slot >= policy_.min_nodes) {
    // Every node from the MIN-th on may end the last call; the first claim wins, and the
    // MIN-th node's deadline is the earliest.
    phase_ = Phase::kLastCall;
    last_call_deadline_s_ = std::min(now_s + policy_.last_call_timeout_s, join_deadline_s_);
    return AwaitClose{last_call_deadline_s_};
  }
  phase_ = Phase::kBelowMin;
  return AwaitClose{join_deadline_s_};
}

JoinAction JoinStateMachine::on_wait_expired(double now_s) {
  if (phase_ == Phase::kLastCall && now_s >= last_call_deadline_s_) {
    // The last call (or the join deadline, whichever came first) ran out with at least MIN
    // nodes here: close with whoever has joined.
    phase_ = Phase::kClosing;
    return ReadJoinedCount{};
  }
  if (now_s < join_deadline_s_) {
    // A spurious early return of the wait: keep waiting for the same deadline.
    return AwaitClose{phase_ == Phase::kLastCall ? last_call_deadline_s_ : join_deadline_s_};
  }
  phase_ = Phase::kDone;
  return JoinTimedOut{policy_.min_nodes};
}

JoinAction JoinStateMachine::on_joined_count(int joined) {
  phase_ = Phase::kClosing;
  return CloseRound{std::clamp(joined, std::max(slot_, 1), policy_.max_nodes)};
}

JoinAction JoinStateMachine::on_closed(int participants) {
  phase_ = Phase::kDone;
  if (slot_ >= 1 && slot_ <= participants) {
    return BecomeParticipant{slot_, participants};
  }
  return BecomeLate{participants};
}

HeartbeatMonitor::HeartbeatMonitor(double keep_alive_interval_s, int keep_alive_max_attempt,
                                   double now_s)
    : check_period_s_(keep_alive_interval_s / 4),
      // Detection happens at most two check periods after the threshold, so the threshold is
      // the budget minus half an interval; it never drops below one beat gap plus two checks,
      // or healthy peers would be declared lost.
      loss_threshold_s_(
          std::max(keep_alive_interval_s * keep_alive_max_attempt - keep_alive_interval_s / 2,
                   keep_alive_interval_s + 2 * (keep_alive_interval_s / 4))),
      last_change_s_(now_s) {}

bool HeartbeatMonitor::observe(int64_t counter, double now_s) {
  if (lost_) {
    return true;
  }
  if (!last_counter_ || *last_counter_ != counter) {
    last_counter_ = counter;
    last_change_s_ = now_s;
    return false;
  }
  lost_ = now_s - last_change_s_ >= loss_threshold_s_;
  return lost_;
}

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

}  // namespace ddprun::agent::rdzv
