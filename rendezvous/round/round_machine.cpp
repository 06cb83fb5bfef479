// The machine's core: dispatching events, issuing and routing ops, errors, timers and signals.
// The protocol steps live in round_machine_join.cpp (forming a round), round_machine_watch.cpp
// (a running round) and round_machine_end.cpp (failures, success, closing and leaving).

#include "rendezvous/round/round_machine.hpp"

#include <algorithm>
#include <array>

#include "common/overloaded.hpp"
#include "common/signals.hpp"
#include "rendezvous/round/digest_text.hpp"
#include "rendezvous/round/record_checks.hpp"
#include "rendezvous/round/reply.hpp"

namespace ddprun::rendezvous::round {

RoundMachine::RoundMachine(MachineConfig config)
    : config_(std::move(config)), keys_(config_.run_id) {}

std::vector<MachineEffect> RoundMachine::take_effects() {
  std::vector<MachineEffect> out;
  out.swap(effects_);
  return out;
}

std::optional<uint64_t> RoundMachine::current_round() const {
  if (!current_) {
    return std::nullopt;
  }
  return current_->round;
}

int RoundMachine::participants() const {
  return current_ ? current_->assignment.group_world_size : 0;
}

uint64_t RoundMachine::issue(Step step, KvOp op, Group group, int64_t aux) {
  const uint64_t id = next_id_++;
  const bool is_wait = std::holds_alternative<KvWait>(op);
  pending_.emplace(id, Pending{step, group, is_wait, aux});
  emit(IssueKv{id, std::move(op)});
  return id;
}

void RoundMachine::cancel_group(Group group) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.group != group) {
      ++it;
      continue;
    }
    if (it->second.is_wait) {
      emit(CancelKv{it->first});
    }
    it = pending_.erase(it);
  }
}

void RoundMachine::notice(std::string kind, std::string text) {
  emit(Notice{std::move(kind), std::move(text), current_ ? current_->round : join_.round});
}

void RoundMachine::finish(int status, std::string reason, std::vector<WorkerFailure> failures) {
  for (const auto& [id, pending] : pending_) {
    if (pending.is_wait) {
      emit(CancelKv{id});
    }
  }
  pending_.clear();
  phase_ = Phase::kDone;
  emit(Finish{status, std::move(reason), std::move(failures)});
}

void RoundMachine::fail_rendezvous(const std::string& message) {
  if (phase_ == Phase::kDone) {
    return;
  }
  if (stop_signal_) {
    // Already stopping on a signal, and so, likely, is every node (scancel signals them all;
    // the store's host may be gone first): the outcome stays the signal's. The workers stop
    // as asked, then leaving is best effort.
    notice("store_lost", "while stopping on " + close_reason_ + ": " + message);
    cancel_group(Group::kWatch);
    cancel_group(Group::kReport);
    cancel_group(Group::kFlow);
    if (workers_ != Workers::kRunning && workers_ != Workers::kStopping) {
      finish(close_status_, close_reason_);
    }
    return;
  }
  if (workers_ == Workers::kRunning || workers_ == Workers::kStopping) {
    // Never leave workers behind: stop them, then end.
    close_reason_ = message;
    if (workers_ == Workers::kRunning) {
      stop_workers(15, AfterStop::kStoreLost);
    } else {
      after_stop_ = AfterStop::kStoreLost;
    }
    cancel_group(Group::kWatch);
    cancel_group(Group::kReport);
    cancel_group(Group::kFlow);
    return;
  }
  finish(kExitFailure, "rendezvous failed: " + message);
}

void RoundMachine::step(const MachineEvent& event, MachineTime now) {
  if (phase_ == Phase::kDone) {
    return;
  }
  try {
    std::visit(common::Overloaded{
                   [&](const Begin&) {
                     if (phase_ == Phase::kIdle) {
                       join_.deadline = now + config_.settings.join_timeout;
                       begin_join(now);
                     }
                   },
                   [&](const KvAnswered& answered) {
                     auto it = pending_.find(answered.id);
                     if (it == pending_.end()) {
                       return;  // an op of an abandoned step
                     }
                     const Pending pending = it->second;
                     pending_.erase(it);
                     if (const auto* error = std::get_if<KvError>(&answered.result)) {
                       on_kv_error(pending, *error, now);
                       return;
                     }
                     if (pending.group == Group::kWatch) {
                       watch_.last_answer = now;
                       watch_.slowness_reported = false;
                     }
                     on_reply(pending, answered.result, now);
                   },
                   [&](const TimerFired&) { on_timer(now); },
                   [&](const WorkersStoreHosted& hosted) {
                     if (phase_ == Phase::kForming && current_ && current_->master_port == 0) {
                       issue(Step::kMasterSet,
                             KvSet{keys_.master(current_->round),
                                   hosted.addr + " " + std::to_string(hosted.port)});
                       workers_store_known(hosted.addr, hosted.port, now);
                     }
                   },
                   [&](const WorkersStoreFailed& failed) {
                     if (phase_ == Phase::kForming) {
                       fail_rendezvous("cannot start the workers' store: " + failed.message);
                     }
                   },
                   [&](const WorkersSucceeded&) {
                     if (workers_ == Workers::kRunning) {
                       workers_ = Workers::kSucceeded;
                       enter_exit_barrier(now);
                     }
                   },
                   [&](const WorkersFailed& failed) {
                     if (workers_ == Workers::kRunning && phase_ == Phase::kRunning) {
                       report_failure(failed.failures);
                     }
                   },
                   [&](const WorkersStopped& stopped) {
                     if (workers_ == Workers::kStopping) {
                       workers_stopped(stopped.failures, now);
                     }
                   },
                   [&](const SignalReceived& received) { on_signal(received.signal, now); },
                   [&](const HangDetected& hang) { hang_detected(hang.report); },
                   [&](const StacksCaptured&) { stacks_captured(); },
                   [&](const NodeChecked& checked) { node_checked(checked, now); },
                   [&](const CollectiveBroke&) { collective_broke(); },
               },
               event);
  } catch (const CorruptRecord& corrupt) {
    fail_rendezvous(corrupt_rendezvous_message(config_.run_id, corrupt.what()));
  } catch (const RendezvousError& error) {
    fail_rendezvous(error.what());
  }
}

void RoundMachine::on_kv_error(const Pending& pending, const KvError& error, MachineTime now) {
  if (pending.step == Step::kHangAcksWait) {
    release_hung_worker(false);  // the store's trouble must not keep a hung worker alive
  }
  if (error.kind == KvErrorKind::kUnresponsive && pending.group == Group::kWatch) {
    // A slow store is not a lost one (an overloaded host, as torchrun's failed keep-alives):
    // warn once, and give up only when it answered nothing for read_timeout.
    if (pending.step == Step::kBeat) {
      watch_.beat_outstanding = false;
    } else if (pending.step == Step::kProbe) {
      watch_.probe_outstanding = false;
    } else if (pending.step == Step::kWakeWait) {
      // Re-arm the wake-up wait; the connection was re-made.
      issue(Step::kWakeWait,
            KvWait{{keys_.wake(current_->round, current_->slot)}, to_millis(config_.wake_wait)},
            Group::kWatch);
    } else if (pending.step == Step::kHangWait) {
      wait_for_peer_hang();
    }
    if (now - watch_.last_answer <= config_.settings.read_timeout) {
      if (!watch_.slowness_reported) {
        notice("store_slow",
               "warning: the rendezvous store is slow to answer (" + error.message + "); retrying");
        watch_.slowness_reported = true;
      }
      return;
    }
  }
  const bool closing = phase_ == Phase::kClosing || phase_ == Phase::kLeaving;
  if (closing) {
    // As torchrun: leaving is best effort.
    notice("leave_error", "leaving the " + config_.where + ": " + error.message);
    if (phase_ == Phase::kClosing) {
      close_step_done(now);
    } else {
      leave_step_done();
    }
    return;
  }
  if (phase_ == Phase::kExitBarrier && pending.group == Group::kFlow) {
    // The workers already succeeded: the barrier is best effort.
    notice("exit_barrier", "exit barrier: " + config_.where + ": " + error.message);
    close_job(kExitSuccess, "workers succeeded", {});
    return;
  }
  if (error.kind == KvErrorKind::kCorrupt) {
    // Not a lost store: another process wrote junk where this op read or counted.
    fail_rendezvous(corrupt_rendezvous_message(config_.run_id, error.message));
    return;
  }
  const bool running = phase_ == Phase::kRunning || phase_ == Phase::kExitBarrier;
  fail_rendezvous(std::string(running ? "lost the connection to the " : "") +
                  (running ? config_.where + ": " : config_.where + ": ") + error.message);
}

void RoundMachine::on_timer(MachineTime now) {
  if (leave_deadline_ && now >= *leave_deadline_) {
    notice("leave_timeout", "leaving the rendezvous timed out, exiting anyway");
    finish(close_status_, close_reason_);
    return;
  }
  if (phase_ == Phase::kRunning || phase_ == Phase::kExitBarrier) {
    watch_timer(now);
  }
  if (phase_ == Phase::kNodeCheck && node_check_retry_ && now >= *node_check_retry_) {
    check_node();
  }
}

void RoundMachine::on_signal(int signal, MachineTime now) {
  const std::string name = common::signal_name(signal);
  switch (phase_) {
    case Phase::kIdle:
    case Phase::kNodeCheck:
    case Phase::kCheckingConfig:
    case Phase::kJoining:
    case Phase::kLate:
    case Phase::kStaticJoining:
    case Phase::kForming:
      if (workers_ == Workers::kNone) {
        // No workers run during a rendezvous: leaving without closing lets the others go on.
        notice("signal", "received " + name + " during rendezvous, exiting");
        finish(exit_status_for_signal(signal), "signal " + name);
        return;
      }
      break;
    case Phase::kExitBarrier:
      notice("signal", "received " + name + ", exiting");
      finish(exit_status_for_signal(signal), "signal " + name);
      return;
    case Phase::kClosing:
    case Phase::kLeaving:
      if (stop_signal_) {
        finish(close_status_, close_reason_);  // a second signal: go now
        return;
      }
      stop_signal_ = signal;
      return;
    case Phase::kRunning:
    case Phase::kDone:
      break;
  }
  if (stop_signal_) {
    return;
  }
  stop_signal_ = signal;
  close_status_ = exit_status_for_signal(signal);
  close_reason_ = "signal " + name;
  if (workers_ == Workers::kRunning) {
    notice("signal", "received " + name + ", stopping the workers");
    // The same signal first (a trainer snapshots on SIGTERM), SIGKILL after the timeout.
    stop_workers(signal, AfterStop::kLeave);
  } else if (workers_ == Workers::kStopping) {
    notice("signal", "received " + name + " while the workers stop");
    after_stop_ = AfterStop::kLeave;
  } else {
    leave(now);
  }
}

void RoundMachine::workers_stopped(std::vector<WorkerFailure> own_failures, MachineTime now) {
  workers_ = Workers::kNone;
  if (!own_failures.empty() && current_) {
    std::string lines;
    for (auto& failure : own_failures) {
      failure.while_stopped = true;
      lines += encode_failure_line(failure);
    }
    issue(Step::kFailAppend, KvAppend{keys_.failures(current_->round), std::move(lines)});
    stopped_failures_ = std::move(own_failures);
  }
  on_workers_stopped(now);
}

void RoundMachine::on_workers_stopped(MachineTime now) {
  const AfterStop after = after_stop_;
  after_stop_ = AfterStop::kNothing;
  if (stop_signal_ && after != AfterStop::kStoreLost) {
    cancel_group(Group::kReport);
    leave(now);
    return;
  }
  switch (after) {
    case AfterStop::kNothing:
      break;
    case AfterStop::kReform:
      reform(now);
      break;
    case AfterStop::kAwaitDecision:
      after_report(now);
      break;
    case AfterStop::kFailJob:
      fail_job();
      break;
    case AfterStop::kLeave:
      leave(now);
      break;
    case AfterStop::kStoreLost:
      finish(kExitFailure, "rendezvous failed: " + close_reason_);
      break;
  }
}

std::optional<MachineTime> RoundMachine::next_deadline() const {
  std::optional<MachineTime> earliest;
  auto consider = [&](std::optional<MachineTime> t) {
    if (t && (!earliest || *t < *earliest)) {
      earliest = t;
    }
  };
  if (phase_ == Phase::kDone) {
    return std::nullopt;
  }
  consider(leave_deadline_);
  if (phase_ == Phase::kNodeCheck) {
    consider(node_check_retry_);
  }
  if ((phase_ == Phase::kRunning || phase_ == Phase::kExitBarrier) && current_) {
    if (watch_.heartbeats) {
      consider(watch_.next_beat);
      if (watch_.monitor && !watch_.declared_loss) {
        consider(watch_.next_probe);
      }
    }
    consider(watch_.repoll);
  }
  return earliest;
}

const char* RoundMachine::phase_name() const {
  // In the order of Phase, sized by the list so that the static_assert catches a missing name.
  static constexpr auto kNames = std::to_array<const char*>(
      {"idle", "node-check", "checking-config", "joining", "late", "static-joining", "forming",
       "running", "exit-barrier", "closing", "leaving", "done"});
  static_assert(kNames.size() == static_cast<std::size_t>(Phase::kDone) + 1);
  return kNames[static_cast<std::size_t>(phase_)];
}

std::string RoundMachine::digest() const {
  DigestText out;
  out << phase_name() << '|' << static_cast<int>(workers_) << '|' << static_cast<int>(after_stop_)
      << '|' << config_checked_ << '|' << static_cast<int>(signal_) << '|'
      << stop_signal_.value_or(0) << '|' << node_check_passed_ << ','
      << node_check_retry_.value_or(machine_time(-1)) << '|';
  for (const auto& [id, p] : pending_) {
    // Ids differ between equivalent runs; only what is pending matters.
    out << static_cast<int>(p.step) << ':' << p.aux << ',';
  }
  out << "|j" << join_.round << ',' << join_.expected << ',' << join_.slot << ','
      << join_.replies_outstanding << ',' << join_.closed_by_me << ',' << join_.job_closed << ','
      << join_.deadline << ',' << join_.prev_lost << ',' << join_.prev_waiting << ','
      << restarts_read_ << ',' << last_restart_count_.value_or(-1);
  for (const auto& record : records_) {
    out << ',' << record.value_or("-");
  }
  if (current_) {
    const auto& a = current_->assignment;
    out << "|c" << current_->round << ',' << current_->slot << ',' << a.group_rank << ','
        << a.group_world_size << ',' << a.restart_count << ',' << current_->master_addr << ','
        << current_->master_port;
  }
  if (phase_ == Phase::kRunning || phase_ == Phase::kExitBarrier) {
    out << "|w" << watch_.heartbeats << ',' << watch_.next_beat << ',' << watch_.next_probe << ','
        << watch_.beat_outstanding << ',' << watch_.probe_outstanding << ',' << watch_.declared_loss
        << ',' << watch_.reading_state << ',' << watch_.state_replies << ','
        << watch_.repoll.value_or(machine_time(-1)) << ',' << watch_.hang_published << ','
        << watch_.awaiting_peer_stacks << ',' << watch_.stacks_asked << ',' << watch_.stacks_acked
        << ',' << watch_.suspected;
    if (watch_.monitor) {
      out << ',' << watch_.monitor->digest();
    }
  }
  if (report_) {
    out << "|r" << report_->checks_outstanding << ',' << report_->claimed << ','
        << report_->lost_seen << ',' << report_->restarts_after << ','
        << (report_->decision ? static_cast<int>(*report_->decision) : -1) << ','
        << report_->uncounted;
  }
  out << "|e" << close_status_ << ',' << close_outstanding_ << ',' << leave_outstanding_ << ','
      << leave_deadline_.value_or(machine_time(-1));
  return out.str();
}

}  // namespace ddprun::rendezvous::round
