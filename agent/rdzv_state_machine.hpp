#pragma once
// The rendezvous decisions, free of sockets and clocks: the driver feeds events (the slot the
// join counter gave, a wait that ran out, the closed count, heartbeat counters) with the time as
// a plain number of seconds on a monotonic clock, and carries out the returned action.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "agent/rendezvous_handler.hpp"

namespace ddprun::agent::rdzv {

struct JoinPolicy {
  int min_nodes = 1;
  int max_nodes = 1;
  // Nodes the round is expected to gather (survivors plus waiting nodes of the previous round);
  // 0 when unknown. Reaching it closes the round without a last call.
  int expected_nodes = 0;
  double last_call_timeout_s = 30;
};

// Block on the round's closed key until the given time.
struct AwaitClose {
  double until_s = 0;
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
  JoinStateMachine(JoinPolicy policy, double join_deadline_s);

  // The join counter gave this node `slot` at time now_s.
  JoinAction on_joined(int slot, double now_s);
  // The AwaitClose wait ran out without the round closing.
  JoinAction on_wait_expired(double now_s);
  // After ReadJoinedCount: the counter's current value.
  JoinAction on_joined_count(int joined);
  // The round closed with this many participants (slots 1..participants).
  JoinAction on_closed(int participants);

  // The count at which the round closes at once.
  int close_target() const;

 private:
  enum class Phase { kNotJoined, kBelowMin, kLastCall, kOverMax, kClosing, kDone };
  JoinPolicy policy_;
  double join_deadline_s_;
  double last_call_deadline_s_ = 0;
  int slot_ = 0;
  Phase phase_ = Phase::kNotJoined;
};

// Watches one peer's heartbeat counter. Only this node's monotonic clock is used: the peer is
// lost when its counter has not changed for loss_threshold_s() of our time.
class HeartbeatMonitor {
 public:
  HeartbeatMonitor(double keep_alive_interval_s, int keep_alive_max_attempt, double now_s);

  // Returns true once the peer counts as lost (and keeps returning true).
  bool observe(int64_t counter, double now_s);

  // How often the counter should be read. With it, a peer that stops at time t is declared lost
  // by t + keep_alive_interval x keep_alive_max_attempt (for max_attempt >= 2), and a healthy
  // peer that beats every keep_alive_interval never is.
  double check_period_s() const { return check_period_s_; }
  double loss_threshold_s() const { return loss_threshold_s_; }

 private:
  double check_period_s_;
  double loss_threshold_s_;
  std::optional<int64_t> last_counter_;
  double last_change_s_;
  bool lost_ = false;
};

// The published outcome of a round's first failure report.
enum class FailureDecision { kRestart, kExhausted };

// A restart is allowed while the job-wide counter, after this failure's increment, is within
// max_restarts.
FailureDecision decide_failure(int64_t restarts_after_increment, int max_restarts);
std::string to_string(FailureDecision decision);
std::optional<FailureDecision> parse_failure_decision(const std::string& text);

// What the running round's wake-up means.
struct WakeObservation {
  std::optional<FailureDecision> failure;
  int64_t lost_nodes = 0;
  int64_t waiting_nodes = 0;
  int participants = 0;
  int max_nodes = 0;
};
RoundSignal decide_round_signal(const WakeObservation& observation);

// Nodes the next round should gather after a membership change or restart of this one.
int next_round_expected_nodes(int participants, int64_t lost_nodes, int64_t waiting_nodes,
                              int max_nodes);

// Whether the waiting nodes may wake the round: not when it is already at max_nodes (they are
// spares until someone is lost, as torchrun's redundancy list).
bool waiting_node_wakes_round(int participants, int max_nodes);

}  // namespace ddprun::agent::rdzv
