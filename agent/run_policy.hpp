#pragma once
// The run loop's decisions, as pure functions of what happened: what to do with the workers,
// whether the next round counts as a restart, and the agent's exit status.

#include "agent/rendezvous_handler.hpp"
#include "agent/worker_exit.hpp"

namespace ddprun::agent {

enum class LoopAction {
  kKeepRunning,    // nothing to do
  kExitBarrier,    // local workers succeeded: wait for the others, then exit 0
  kReportFailure,  // local workers failed: stop them and tell the job
  kReformRound,    // stop the workers and rendezvous again (membership change or restart)
  kFailJob,        // stop the workers, print the job-wide summary, exit 1
};

// Local worker state first (a local failure is reported even if the job failed elsewhere at
// the same moment, so it is part of the job-wide summary), then the rendezvous.
LoopAction decide(GroupState local, RoundSignal round);

// Exit statuses. 128+N for a signal N, so a requeue wrapper can tell "preempted" from
// "failed" (torchrun exits 1 for both).
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
int exit_status_for_signal(int signal_number);

}  // namespace ddprun::agent
