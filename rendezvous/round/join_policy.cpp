#include "rendezvous/round/join_policy.hpp"

#include <algorithm>

namespace ddprun::rendezvous::round {

JoinStateMachine::JoinStateMachine(JoinPolicy policy, MachineTime join_deadline)
    : policy_(policy), join_deadline_(join_deadline) {}

int JoinStateMachine::close_target() const {
  const int wanted = policy_.expected_nodes > 0 ? policy_.expected_nodes : policy_.max_nodes;
  return std::clamp(wanted, policy_.min_nodes, policy_.max_nodes);
}

JoinAction JoinStateMachine::on_joined(int slot, MachineTime now) {
  slot_ = slot;
  if (slot > policy_.max_nodes) {
    // The node holding slot max_nodes closes the round; wait to learn the count.
    phase_ = Phase::kOverMax;
    return AwaitClose{join_deadline_};
  }
  if (slot == close_target()) {
    phase_ = Phase::kClosing;
    return CloseRound{slot};
  }
  if (slot >= policy_.min_nodes) {
    // Every node from the MIN-th on may end the last call; the first claim wins, and the
    // MIN-th node's deadline is the earliest.
    phase_ = Phase::kLastCall;
    last_call_deadline_ = std::min(now + policy_.last_call_timeout, join_deadline_);
    return AwaitClose{last_call_deadline_};
  }
  phase_ = Phase::kBelowMin;
  return AwaitClose{join_deadline_};
}

JoinAction JoinStateMachine::on_wait_expired(MachineTime now) {
  if (phase_ == Phase::kLastCall && now >= last_call_deadline_) {
    // The last call (or the join deadline, whichever came first) ran out with at least MIN
    // nodes here: close with whoever has joined.
    phase_ = Phase::kClosing;
    return ReadJoinedCount{};
  }
  if (now < join_deadline_) {
    // A spurious early return of the wait: keep waiting for the same deadline.
    return AwaitClose{phase_ == Phase::kLastCall ? last_call_deadline_ : join_deadline_};
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

}  // namespace ddprun::rendezvous::round
