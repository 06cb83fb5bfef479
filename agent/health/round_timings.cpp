#include "agent/health/round_timings.hpp"

namespace ddprun::agent {
namespace {

void add(DurationTally& tally, RoundTimings::Clock::duration took) {
  const double seconds = std::chrono::duration<double>(took).count();
  ++tally.count;
  tally.sum_s += seconds;
  tally.last_s = seconds;
}

}  // namespace

void RoundTimings::interrupted(Clock::time_point now) {
  if (!interrupted_at_) {
    interrupted_at_ = now;
  }
}

void RoundTimings::workers_gone(Clock::time_point now) {
  if (!waiting_since_) {
    waiting_since_ = now;
  }
}

void RoundTimings::workers_started(Clock::time_point now) {
  if (waiting_since_) {
    add(rendezvous_, now - *waiting_since_);
  }
  if (interrupted_at_) {
    add(restart_, now - *interrupted_at_);
  }
  waiting_since_.reset();
  interrupted_at_.reset();
}

}  // namespace ddprun::agent
