#pragma once
// When a group whose first worker failed is stopped. Pure: no clock, no /proc.
//
// Ranks of one job often fail together (an NCCL error, the same exception after the same
// collective, the same import error at start-up), and each such rank's exit code and error file
// belong in the failure table. Stopping the others the moment the first exit is reaped would
// turn their own failures, a few milliseconds later, into SIGTERMs of ours (torchrun, which
// looks every 0.1 s, lists them). So the stop waits while others may still fail on their own:
//   - for the group's start spread plus a little slack: a worker started d later than the first
//     reaches the same failure about d later;
//   - beyond that, while a worker still has a runnable thread (it may be on its way out), up
//     to a limit: torchrun's monitor interval, so a failure is never acted on later than there.
// A group whose other workers all sleep (blocked in a collective, a sleep, a read) is stopped
// once the spread has passed: a crash beside idle peers restarts as fast as before.

#include <chrono>

namespace ddprun::agent {

struct FailureGathering {
  using Duration = std::chrono::steady_clock::duration;
  static constexpr Duration kSlack = std::chrono::milliseconds(2);
  static constexpr Duration kLimit = std::chrono::milliseconds(100);

  // What the group looks like now.
  struct Now {
    Duration since_first_failure{};
    bool any_running = false;   // some worker has not exited (nor been abandoned)
    bool any_runnable = false;  // some running worker has a thread the kernel calls runnable
  };

  // start_spread: from the group's first worker's start to its last's.
  explicit FailureGathering(Duration start_spread) : start_spread_(start_spread) {}

  // Whether to send the stop signal now.
  bool stop_now(const Now& now) const;
  // How long to look again after, when stop_now said no: the first moment the answer can change
  // by time alone, else a short poll of the runnable threads (bounded by kLimit).
  Duration look_again_after(const Now& now) const;

 private:
  Duration min_wait() const { return start_spread_ + kSlack; }
  Duration start_spread_;
};

}  // namespace ddprun::agent
