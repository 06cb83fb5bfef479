#pragma once
// The decisions a running round takes from what the store says: whether a failure restarts the
// job, what a wake-up means, how many nodes the next round expects.

#include <cstdint>
#include <optional>
#include <string>

namespace ddprun::rendezvous::round {

// What the running round must do, from what the store says after a wake-up.
enum class RoundSignal {
  kNone,
  kMembershipChange,  // a node waits to join or a participant was lost: re-form, not a restart
  kRestartRequested,  // another node's workers failed and a restart is allowed: re-form
  kJobFailed,         // another node's workers failed and restarts are exhausted: stop
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

}  // namespace ddprun::rendezvous::round
