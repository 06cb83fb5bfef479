#include "agent/run_policy.hpp"

namespace ddprun::agent {

LoopAction decide(GroupState local, RoundSignal round) {
  if (local == GroupState::kFailed)
    return LoopAction::kReportFailure;
  switch (round) {
    case RoundSignal::kJobFailed:
      return LoopAction::kFailJob;
    case RoundSignal::kMembershipChange:
    case RoundSignal::kRestartRequested:
      return LoopAction::kReformRound;
    case RoundSignal::kNone:
      break;
  }
  return local == GroupState::kSucceeded ? LoopAction::kExitBarrier : LoopAction::kKeepRunning;
}

int exit_status_for_signal(int signal_number) {
  return 128 + signal_number;
}

}  // namespace ddprun::agent
