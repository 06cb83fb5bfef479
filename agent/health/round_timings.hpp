#pragma once
// How long this node's workers were missing: the rendezvous (from the agent's start, or from the
// moment the last workers were gone, to the next workers started) and the restart (from the
// first failure or stop the agent noticed to the next workers started). Pure: the loop notes the
// moments, /metrics reports the tallies.

#include <chrono>
#include <optional>

#include "agent/health/health_board.hpp"

namespace ddprun::agent {

class RoundTimings {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RoundTimings(Clock::time_point agent_start) : waiting_since_(agent_start) {}

  // A worker failed, or the round stopped the workers: the first of these per group counts.
  void interrupted(Clock::time_point now);
  // The group is gone (reaped or abandoned): the next rendezvous starts (the first call per group
  // counts).
  void workers_gone(Clock::time_point now);
  void workers_started(Clock::time_point now);

  const DurationTally& rendezvous() const { return rendezvous_; }
  const DurationTally& restart() const { return restart_; }

 private:
  std::optional<Clock::time_point> waiting_since_;
  std::optional<Clock::time_point> interrupted_at_;
  DurationTally rendezvous_;
  DurationTally restart_;
};

}  // namespace ddprun::agent
