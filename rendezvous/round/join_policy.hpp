#pragma once
// How one node joins one c10d round, free of sockets and clocks: fed the slot the join counter
// gave, a wait that ran out, the closed count, with the time as a value on the machine's
// monotonic clock; answers what to do next (wait for the close, claim it, read the count, ...).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "common/seconds.hpp"
#include "rendezvous/round/machine_time.hpp"

namespace ddprun::rendezvous::round {

struct JoinPolicy {
  int min_nodes = 1;
  int max_nodes = 1;
  // Nodes the round is expected to gather (survivors plus waiting nodes of the previous round);
  // 0 when unknown. Reaching it closes the round without a last call.
  int expected_nodes = 0;
  common::Seconds last_call_timeout{30};
};

// Block on the round's closed key until the given time.
struct AwaitClose {
  MachineTime until{};
};
// Claim the close of the round with this many participants (exclusive: first claim wins).
struct CloseRound {
  int participants = 0;
};
// Read the join counter now (the last call ran out) and feed on_joined_count.
struct ReadJoinedCount {};
struct BecomeParticipant {
  int slot = 0;
  int participants = 0;
};
// The round closed without this node: wait for the next one.
struct BecomeLate {
  int participants = 0;
};
struct JoinTimedOut {
  int min_nodes = 0;
};
using JoinAction = std::variant<AwaitClose, CloseRound, ReadJoinedCount, BecomeParticipant,
                                BecomeLate, JoinTimedOut>;

// One node's view of joining one round. Slots are 1-based, in join order.
class JoinStateMachine {
 public:
  JoinStateMachine(JoinPolicy policy, MachineTime join_deadline);

  // The join counter gave this node `slot` at time now.
  JoinAction on_joined(int slot, MachineTime now);
  // The AwaitClose wait ran out without the round closing.
  JoinAction on_wait_expired(MachineTime now);
  // After ReadJoinedCount: the counter's current value.
  JoinAction on_joined_count(int joined);
  // The round closed with this many participants (slots 1..participants).
  JoinAction on_closed(int participants);

  // The count at which the round closes at once.
  int close_target() const;

 private:
  enum class Phase { kNotJoined, kBelowMin, kLastCall, kOverMax, kClosing, kDone };
  JoinPolicy policy_;
  MachineTime join_deadline_;
  MachineTime last_call_deadline_{};
  int slot_ = 0;
  Phase phase_ = Phase::kNotJoined;
};

}  // namespace ddprun::rendezvous::round
