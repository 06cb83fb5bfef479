// How a round ends: a local failure is published and decided once per round (the first claim
// counts the restart against max_restarts), local success waits in the exit barrier, a failed
// job reads every node's failures for the summary, the job closes (so late joiners fail now,
// not at join_timeout), and a node stopped by a signal leaves like a lost node so the others
// scale down at once.

#include <algorithm>

#include "rendezvous/round/record_checks.hpp"
#include "rendezvous/round/reply.hpp"
#include "rendezvous/round/round_machine.hpp"

namespace ddprun::rendezvous::round {

namespace {
constexpr int kSigterm = 15;
}  // namespace

void RoundMachine::report_failure(std::vector<WorkerFailure> failures) {
  report_ = Report{};
  report_->failures = std::move(failures);
  // Gang semantics, as torchrun: the first failure stops the whole local group.
  stop_workers(kSigterm, AfterStop::kAwaitDecision);
  if (elastic()) {
    // Workers that fail in a round that already lost a node fail because of it (a peer's
    // connection reset): a membership change, not a restart, unless a decision exists.
    const uint64_t r = current_->round;
    report_->checks_outstanding = 2;
    issue(Step::kFailClaimCheck, KvGet{keys_.fail_claim(r)}, Group::kReport);
    issue(Step::kFailLostCheck, KvCountTickets{keys_.lost(r)}, Group::kReport);
    return;
  }
  publish_failure();
}

void RoundMachine::report_checks_done(MachineTime now) {
  if (!report_->claimed && report_->lost_seen) {
    report_->uncounted = true;
    signal_ = RoundSignal::kMembershipChange;
    notice("membership_change",
           "the workers failed after a node of the round was lost: re-forming, not counted as a "
           "restart");
    if (workers_ == Workers::kNone) {
      after_report(now);
    }
    return;
  }
  publish_failure();
}

void RoundMachine::publish_failure() {
  const uint64_t r = current_->round;
  if (!report_->failures.empty()) {
    std::string lines;
    for (const auto& failure : report_->failures) {
      lines += encode_failure_line(failure);
    }
    issue(Step::kFailAppend, KvAppend{keys_.failures(r), std::move(lines)}, Group::kReport);
  }
  // One decision per round however many nodes fail in it: the first claim counts the restart.
  issue(Step::kFailClaim, KvCompareSet{keys_.fail_claim(r), std::nullopt, config_.self.nonce},
        Group::kReport);
}

void RoundMachine::decision_known(FailureDecision decision, MachineTime now) {
  report_->decision = decision;
  signal_ = decision == FailureDecision::kRestart ? RoundSignal::kRestartRequested
                                                  : RoundSignal::kJobFailed;
  if (decision == FailureDecision::kExhausted) {
    notice("job_failed", "the worker group failed and no restarts are left (--max-restarts " +
                             std::to_string(config_.max_restarts) + ")");
  }
  if (workers_ == Workers::kNone) {
    after_report(now);
  }
}

void RoundMachine::after_report(MachineTime now) {
  if (!report_ || (!report_->decision && !report_->uncounted)) {
    return;  // the decision is still being read; it calls back here
  }
  if (report_->uncounted || report_->decision == FailureDecision::kRestart) {
    reform(now);
    return;
  }
  fail_job();
}

void RoundMachine::enter_exit_barrier(MachineTime /*now*/) {
  phase_ = Phase::kExitBarrier;
  cancel_group(Group::kReport);
  const uint64_t r = current_->round;
  issue(Step::kExitAdd, KvTakeTicket{keys_.exit_count(r), config_.self.nonce});
  issue(Step::kExitWait, KvWait{{keys_.exit_done(r)}, to_millis(config_.exit_barrier_timeout)});
}

void RoundMachine::fail_job() {
  phase_ = Phase::kClosing;
  close_status_ = kExitFailure;
  close_reason_ = "workers failed";
  close_failures_ =
      merge_failures(report_ ? report_->failures : std::vector<WorkerFailure>{}, stopped_failures_);
  cancel_group(Group::kWatch);
  cancel_group(Group::kReport);
  issue(Step::kFailuresRead, KvGet{keys_.failures(current_->round)});
}

void RoundMachine::close_job(int status, std::string reason, std::vector<WorkerFailure> failures) {
  phase_ = Phase::kClosing;
  cancel_group(Group::kWatch);
  cancel_group(Group::kReport);
  close_status_ = status;
  close_reason_ = std::move(reason);
  close_failures_ = std::move(failures);
  if (!current_) {
    finish(close_status_, close_reason_, close_failures_);
    return;
  }
  const uint64_t r = current_->round;
  // The job's outcome: a spare that finds it closed exits as the job did.
  issue(Step::kCloseJob, KvSet{keys_.job_closed(), close_status_ == kExitSuccess ? "0" : "1"});
  issue(Step::kCloseReform, KvSet{keys_.reform(r), "closed"});  // releases waiting nodes
  close_later_rounds();
}

void RoundMachine::close_later_rounds() {
  // A node that re-joined after a failure this node did not take part in waits in a newer
  // round: fail it now instead of at join_timeout.
  const uint64_t r = current_->round;
  const std::string error =
      "error " + config_.where + " is closed: " + config_.self.addr + " ended the job";
  if (elastic()) {
    issue(Step::kCloseNewest, KvCompareSet{keys_.round(), std::nullopt, "0"});
    return;
  }
  // Static: every node is needed for a round, so the next one cannot have formed without this
  // node: node 0 waits for records, the others for assignments. Fill both with the error.
  const int nodes = config_.self.max_nodes;
  auto later = keys_.for_slots(nodes, [&](int s) { return keys_.node(r + 1, s); });
  for (int s = 1; s <= nodes; ++s) {
    later.push_back(keys_.assignment(r + 1, s));
  }
  const auto count = later.size();
  issue(Step::kCloseLaterStatic,
        KvMultiSet{std::move(later), std::vector<std::string>(count, error)});
}

void RoundMachine::close_step_done(MachineTime /*now*/) {
  // An error while closing: leaving is best effort.
  finish(close_status_, close_reason_, close_failures_);
}

void RoundMachine::leave(MachineTime now) {
  phase_ = Phase::kLeaving;
  cancel_group(Group::kWatch);
  cancel_group(Group::kReport);
  if (!current_) {
    finish(close_status_, close_reason_);
    return;
  }
  // Leaving is best effort: a store host that is itself going away must not keep a stopped
  // agent alive, so the exit goes ahead after a short bound.
  leave_deadline_ = now + config_.leave_timeout;
  const uint64_t r = current_->round;
  const int n = current_->assignment.group_world_size;
  if (elastic() && signal_ == RoundSignal::kNone && n > 1) {
    // Leave like a lost node, at once, so the others scale down.
    issue(Step::kLeaveLost, KvTakeTicket{keys_.lost(r), config_.self.nonce});
    std::vector<std::string> others;
    for (int s = 1; s <= n; ++s) {
      if (s != current_->slot) {
        others.push_back(keys_.wake(r, s));
      }
    }
    const auto count = others.size();
    issue(Step::kLeaveWake, KvMultiSet{std::move(others), std::vector<std::string>(count, "left")});
  }
  issue(Step::kLeftAdd, KvTakeTicket{keys_.left(r), config_.self.nonce});
}

void RoundMachine::leave_step_done() {
  finish(close_status_, close_reason_);
}

void RoundMachine::on_ending_reply(const Pending& pending, const KvResult& result,
                                   MachineTime now) {
  if (!on_failure_reply(pending, result, now) && !on_exit_barrier_reply(pending, result) &&
      !on_closing_reply(pending, result)) {
    throw RendezvousError("internal error: a reply for an unknown step");
  }
}

// A local failure: who decides (the fail claim), what (restarts left, a node already finished),
// and reading another node's decision.
bool RoundMachine::on_failure_reply(const Pending& pending, const KvResult& result,
                                    MachineTime now) {
  switch (pending.step) {
    case Step::kFailClaimCheck:
      check_token(value_of(result), keys_.fail_claim(current_->round));
      report_->claimed = value_of(result).has_value();
      if (--report_->checks_outstanding == 0) {
        report_checks_done(now);
      }
      return true;
    case Step::kFailLostCheck:
      report_->lost_seen = checked_counter(counter_of(result), 0, kMaxCount,
                                           keys_.lost(current_->round), "lost nodes") > 0;
      if (--report_->checks_outstanding == 0) {
        report_checks_done(now);
      }
      return true;
    case Step::kFailAppend:
    case Step::kFailedSet:
      return true;
    case Step::kFailClaim: {
      const uint64_t r = current_->round;
      check_token(value_of(result), keys_.fail_claim(r));
      if (value_of(result) != config_.self.nonce) {
        issue(Step::kFailedWait,
              KvWait{{keys_.failed(r)}, to_millis(config_.settings.close_timeout)}, Group::kReport);
        return true;
      }
      report_->checks_outstanding = 2;
      issue(Step::kRestartsAdd, KvAdd{keys_.restarts(), 1}, Group::kReport);
      issue(Step::kExitCountRead, KvCountTickets{keys_.exit_count(r)}, Group::kReport);
      return true;
    }
    case Step::kRestartsAdd:
      report_->restarts_after =
          checked_counter(counter_of(result), 1, kMaxRestarts, keys_.restarts(), "restarts");
      failure_checks_done(now);
      return true;
    case Step::kExitCountRead:
      // reused: a node already finished
      report_->lost_seen = checked_counter(counter_of(result), 0, kMaxCount,
                                           keys_.exit_count(current_->round), "finished nodes") > 0;
      failure_checks_done(now);
      return true;
    case Step::kFailedWait:
      require_ready(result, config_.where,
                    "another node claimed this round's failure but published no decision "
                    "within close_timeout");
      issue(Step::kFailedRead, KvGet{keys_.failed(current_->round)}, Group::kReport);
      return true;
    case Step::kFailedRead: {
      const std::string text = value_of(result).value_or("");
      const auto decision = parse_failure_decision(text);
      if (!decision) {
        throw CorruptRecord(keys_.failed(current_->round),
                            "holds " + shown_value(text) + ", not a failure decision");
      }
      decision_known(*decision, now);
      return true;
    }
    default:
      return false;
  }
}

// The fail claim's winner, once it knows the restarts and whether a node already finished:
// decides, publishes the decision and interrupts every node of the round.
void RoundMachine::failure_checks_done(MachineTime now) {
  if (--report_->checks_outstanding > 0) {
    return;
  }
  const uint64_t r = current_->round;
  const int n = current_->assignment.group_world_size;
  FailureDecision d = decide_failure(report_->restarts_after, config_.max_restarts);
  if (report_->lost_seen) {
    // A node of this round already finished its workers: the gang cannot restart as one,
    // so the job fails now instead of waiting for a node that will never rejoin.
    d = FailureDecision::kExhausted;
  }
  issue(Step::kFailedSet, KvSet{keys_.failed(r), to_string(d)}, Group::kReport);
  auto interrupt = keys_.for_slots(n, [&](int s) { return keys_.wake(r, s); });
  interrupt.push_back(keys_.exit_done(r));  // releases nodes in the exit barrier
  const auto count = interrupt.size();
  issue(Step::kInterrupt,
        KvMultiSet{std::move(interrupt), std::vector<std::string>(count, "interrupted")},
        Group::kReport);
  decision_known(d, now);
}

// Success: the exit barrier.
bool RoundMachine::on_exit_barrier_reply(const Pending& pending, const KvResult& result) {
  switch (pending.step) {
    case Step::kExitAdd:
      if (checked_counter(counter_of(result), 1, kMaxCount, keys_.exit_count(current_->round),
                          "finished nodes") >= participants()) {
        issue(Step::kExitDoneSet, KvSet{keys_.exit_done(current_->round), "1"});
      }
      return true;
    case Step::kExitDoneSet:
      return true;
    case Step::kExitWait:
      if (!ready_of(result)) {
        notice("exit_barrier",
               "exit barrier: not every node finished within " +
                   std::to_string(static_cast<int>(config_.exit_barrier_timeout.count())) + " s");
        close_job(kExitSuccess, "workers succeeded", {});
        return true;
      }
      issue(Step::kExitDoneRead, KvGet{keys_.exit_done(current_->round)});
      return true;
    case Step::kExitDoneRead:
      if (value_of(result) == std::optional<std::string>("interrupted")) {
        notice("exit_barrier", "exit barrier: another node failed or left the round");
      }
      close_job(kExitSuccess, "workers succeeded", {});
      return true;
    default:
      return false;
  }
}

// A failed job, closing, leaving.
bool RoundMachine::on_closing_reply(const Pending& pending, const KvResult& result) {
  switch (pending.step) {
    case Step::kFailuresRead: {
      std::vector<WorkerFailure> failures;
      if (const auto& text = value_of(result)) {
        failures = decode_failure_lines(*text);
      }
      if (report_) {
        failures = merge_failures(std::move(failures), report_->failures);
      }
      close_job(kExitFailure, "workers failed",
                merge_failures(std::move(failures), stopped_failures_));
      return true;
    }
    case Step::kCloseJob:
    case Step::kCloseReform:
    case Step::kCloseLaterSet:
    case Step::kLeaveLost:
    case Step::kLeaveWake:
      return true;
    case Step::kCloseNewest:
      close_rounds_after(value_of(result).value_or("0"));
      return true;
    case Step::kCloseLaterClaim:
      if (value_of(result) == config_.self.nonce) {
        issue(Step::kCloseLaterSet, KvSet{keys_.closed(static_cast<uint64_t>(pending.aux)),
                                          "error " + config_.where + " is closed: " +
                                              config_.self.addr + " ended the job"});
      }
      if (--close_outstanding_ == 0) {
        issue(Step::kLeftAdd, KvTakeTicket{keys_.left(current_->round), config_.self.nonce});
      }
      return true;
    case Step::kCloseLaterStatic:
      issue(Step::kLeftAdd, KvTakeTicket{keys_.left(current_->round), config_.self.nonce});
      return true;
    case Step::kLeftAdd:
      if (counter_of(result) >= participants()) {
        issue(Step::kAllLeftSet, KvSet{keys_.all_left(current_->round), "1"});
        return true;
      }
      [[fallthrough]];
    case Step::kAllLeftSet:
      // The store lives in this process: stay (up to close_timeout) until every node of the
      // round is done with it, so the others can still read the job's failures or finish their
      // exit barrier (torchrun #118891). Lost nodes are counted as left by whoever declared
      // them lost.
      if (phase_ == Phase::kClosing && config_.hosts_store && participants() > 1) {
        issue(Step::kAllLeftWait,
              KvWait{{keys_.all_left(current_->round)}, to_millis(config_.settings.close_timeout)});
        return true;
      }
      finish(close_status_, close_reason_, close_failures_);
      return true;
    case Step::kAllLeftWait:
      finish(close_status_, close_reason_, close_failures_);
      return true;
    default:
      return false;
  }
}

// Closing: the rounds after this one that may be forming (up to two, never past the newest the
// store knows) are closed with an error, each by whoever claims its close.
void RoundMachine::close_rounds_after(const std::string& newest_text) {
  uint64_t newest = 0;
  for (char c : newest_text) {
    if (c < '0' || c > '9' || newest > (UINT64_MAX - 9) / 10) {
      newest = 0;
      break;
    }
    newest = newest * 10 + static_cast<uint64_t>(c - '0');
  }
  const uint64_t r = current_->round;
  newest = std::max(newest, r + 1);
  close_outstanding_ = 0;
  // Claiming the close is exclusive: a later round that already formed is left alone.
  for (uint64_t later = r + 1; later <= newest && later <= r + 2; ++later) {
    issue(Step::kCloseLaterClaim,
          KvCompareSet{keys_.close_claim(later), std::nullopt, config_.self.nonce}, Group::kFlow,
          static_cast<int64_t>(later));
    ++close_outstanding_;
  }
}

}  // namespace ddprun::rendezvous::round
