// A running round: start the workers, beat this node's heartbeat, watch the next node's (a
// ring, so O(N) store traffic in total), declare it lost when it stops, and react when any node
// interrupts the round through this node's wake key (a failure, a loss, a node waiting to join,
// a node leaving).

#include <algorithm>

#include "common/seconds.hpp"
#include "rendezvous/round/record_checks.hpp"
#include "rendezvous/round/reply.hpp"
#include "rendezvous/round/round_machine.hpp"

namespace ddprun::rendezvous::round {

namespace {
constexpr int kSigterm = 15;
}  // namespace

void RoundMachine::start_round(MachineTime now) {
  const Formed& f = *current_;
  phase_ = Phase::kRunning;
  workers_ = Workers::kRunning;
  signal_ = RoundSignal::kNone;
  report_.reset();
  RoundInfo info;
  info.round = f.round;
  info.group_rank = f.assignment.group_rank;
  info.group_world_size = f.assignment.group_world_size;
  info.base_global_rank = f.assignment.base_global_rank;
  info.world_size = f.assignment.world_size;
  info.restart_count = f.assignment.restart_count;
  info.master_addr = f.master_addr;
  info.master_port = f.master_port;
  info.run_id = config_.run_id;
  if (last_restart_count_ && info.restart_count > *last_restart_count_) {
    const int left = std::max(config_.max_restarts - info.restart_count, 0);
    notice("restart", "restarting the worker group: restart " + std::to_string(info.restart_count) +
                          " of " + std::to_string(config_.max_restarts) + " (" +
                          std::to_string(left) + " left)");
  }
  last_restart_count_ = info.restart_count;
  emit(StartWorkers{info});

  watch_ = Watch{};
  watch_.last_answer = now;
  const int n = f.assignment.group_world_size;
  if (n == 1 && config_.self.max_nodes == 1) {
    return;  // alone and full: nothing can interrupt this round but this node itself
  }
  issue(Step::kWakeWait, KvWait{{keys_.wake(f.round, f.slot)}, to_millis(config_.wake_wait)},
        Group::kWatch);
  if (config_.captures_stacks_for_peers && n > 1) {
    wait_for_peer_hang();
  }
  if (elastic() && n > 1) {
    watch_.heartbeats = true;
    const auto& s = config_.settings;
    watch_.monitor.emplace(s.keep_alive_interval, s.keep_alive_max_attempt, now);
    watch_.next_beat = now;
    watch_.next_probe = now + watch_.monitor->check_period();
    watch_timer(now);
  }
}

void RoundMachine::watch_timer(MachineTime now) {
  const Formed& f = *current_;
  if (watch_.heartbeats) {
    if (now >= watch_.next_beat) {
      if (!watch_.beat_outstanding) {
        issue(Step::kBeat, KvBeat{keys_.heartbeat(f.round, f.slot)}, Group::kWatch);
        watch_.beat_outstanding = true;
      }
      watch_.next_beat = now + config_.settings.keep_alive_interval;
    }
    if (watch_.monitor && !watch_.declared_loss && now >= watch_.next_probe) {
      if (!watch_.probe_outstanding) {
        issue(Step::kProbe, KvProbe{keys_.heartbeat(f.round, f.assignment.neighbor_slot)},
              Group::kWatch);
        watch_.probe_outstanding = true;
        watch_.probe_issued = now;
      }
      watch_.next_probe = now + watch_.monitor->check_period();
    }
  }
  if (watch_.repoll && now >= *watch_.repoll) {
    watch_.repoll.reset();
    read_round_state();
  }
}

void RoundMachine::probe_answered(const KvLiveness& liveness, MachineTime now) {
  watch_.probe_outstanding = false;
  if (!watch_.monitor || watch_.declared_loss) {
    return;
  }
  if (now - watch_.probe_issued > watch_.monitor->check_period()) {
    watch_.monitor->forgive(now);  // the store stalled, not the peer
  }
  bool lost = false;
  if (liveness.gone && watch_.neighbor_seen) {
    lost = true;  // its lease expired: the store itself says it is gone
  } else {
    watch_.neighbor_seen = watch_.neighbor_seen || !liveness.gone;
    lost = watch_.monitor->observe(liveness.gone ? -1 : liveness.counter, now);
  }
  if (lost) {
    suspect_loss();
  }
}

void RoundMachine::suspect_loss() {
  // Stop probing; first see whether the silent node finished its workers and left: that is no
  // loss, and must not interrupt workers that still run here.
  watch_.declared_loss = true;
  issue(Step::kLossCheckExit, KvCountTickets{keys_.exit_count(current_->round)}, Group::kWatch);
}

void RoundMachine::declare_loss(MachineTime /*now*/) {
  const Formed& f = *current_;
  const uint64_t r = f.round;
  const int n = f.assignment.group_world_size;
  // The lost node's draw, the same whoever declares it.
  const std::string lost_member = "lost-slot-" + std::to_string(f.assignment.neighbor_slot);
  // Count first, then wake: whoever wakes reads the counter.
  issue(Step::kLostAdd, KvTakeTicket{keys_.lost(r), lost_member}, Group::kWatch);
  // The lost node will never leave by itself: count it, so the store's host does not wait for
  // it at the end.
  issue(Step::kLeftAddForLost, KvTakeTicket{keys_.left(r), lost_member}, Group::kWatch);
  auto interrupt = keys_.for_slots(n, [&](int s) { return keys_.wake(r, s); });
  interrupt.push_back(keys_.exit_done(r));  // nobody waits for the lost node in the barrier
  const auto count = interrupt.size();
  issue(Step::kInterrupt,
        KvMultiSet{std::move(interrupt), std::vector<std::string>(count, "interrupted")},
        Group::kWatch);
  // Only for the notice; in the flow group so the re-form the loss causes does not drop it.
  issue(Step::kLostRecordRead, KvGet{keys_.node(r, f.assignment.neighbor_slot)}, Group::kFlow,
        f.assignment.neighbor_slot);
}

void RoundMachine::collective_broke() {
  if (phase_ != Phase::kRunning || workers_ != Workers::kRunning || !current_ || report_ ||
      signal_ != RoundSignal::kNone || watch_.declared_loss || watch_.suspected ||
      participants() < 2) {
    return;
  }
  watch_.suspected = true;
  // A node waiting to join (not a spare), or one already counted lost, explains the break: the
  // round re-forms for that (peers abort their collectives as they keep their workers), and
  // counting a loss on top would make the next round expect one node too few.
  issue(Step::kSuspectWaiting, KvCountTickets{keys_.waiting(current_->round)}, Group::kWatch);
}

void RoundMachine::suspicion_checked(const Pending& pending, const KvResult& result) {
  const uint64_t r = current_->round;
  const bool waiting = pending.step == Step::kSuspectWaiting;
  const int64_t count = checked_counter(counter_of(result), 0, kMaxCount,
                                        waiting ? keys_.waiting(r) : keys_.lost(r), "nodes");
  // Spares (waiting nodes of a round at its maximum) wake nobody, so they explain nothing.
  if (count > 0 && (!waiting || waiting_node_wakes_round(participants(), config_.self.max_nodes))) {
    return;
  }
  if (pending.step == Step::kSuspectWaiting) {
    issue(Step::kSuspectLost, KvCountTickets{keys_.lost(r)}, Group::kWatch);
    return;
  }
  issue(Step::kSuspectClaim,
        KvCompareSet{keys_.suspect_claim(r), std::nullopt,
                     std::to_string(current_->assignment.group_rank)},
        Group::kWatch);
}

// The claim's winner counts the loss and wakes everyone, as a declared loss does (but without
// counting anyone as left: who is gone, the next round's join will tell).
void RoundMachine::suspicion_claimed(const KvResult& result) {
  const Formed& f = *current_;
  const auto& holder = value_of(result);
  if (!holder || *holder != std::to_string(f.assignment.group_rank)) {
    return;  // another node reported it first
  }
  const uint64_t r = f.round;
  notice("collective_broke",
         "a worker's collective failed: re-forming the round now, before the heartbeats tell");
  issue(Step::kLostAdd, KvTakeTicket{keys_.lost(r), "collective-broke"}, Group::kWatch);
  const int n = f.assignment.group_world_size;
  auto interrupt = keys_.for_slots(n, [&](int s) { return keys_.wake(r, s); });
  const auto count = interrupt.size();
  issue(Step::kInterrupt,
        KvMultiSet{std::move(interrupt), std::vector<std::string>(count, "interrupted")},
        Group::kWatch);
}

void RoundMachine::read_round_state() {
  const uint64_t r = current_->round;
  watch_.reading_state = true;
  watch_.state_replies = 3;
  watch_.seen = WakeObservation{};
  issue(Step::kStateFailed, KvGet{keys_.failed(r)}, Group::kWatch);
  issue(Step::kStateLost, KvCountTickets{keys_.lost(r)}, Group::kWatch);
  issue(Step::kStateWaiting, KvCountTickets{keys_.waiting(r)}, Group::kWatch);
}

void RoundMachine::round_state_read(MachineTime now) {
  watch_.reading_state = false;
  watch_.seen.participants = participants();
  watch_.seen.max_nodes = config_.self.max_nodes;
  const RoundSignal decided = decide_round_signal(watch_.seen);
  if (decided == RoundSignal::kNone) {
    // Nothing to act on yet (the wake-up raced the state it announces): look again shortly.
    watch_.repoll = now + config_.settings.keep_alive_interval;
    return;
  }
  // Local worker state comes first: a local failure being reported, or workers that already
  // succeeded (the exit barrier), decide for themselves.
  if (phase_ != Phase::kRunning || workers_ != Workers::kRunning || report_ ||
      signal_ != RoundSignal::kNone) {
    return;
  }
  signal_ = decided;
  switch (decided) {
    case RoundSignal::kMembershipChange:
      notice("membership_change",
             "re-forming the round: " +
                 (watch_.seen.lost_nodes > 0
                      ? std::to_string(watch_.seen.lost_nodes) + " node(s) lost or left"
                      : std::to_string(watch_.seen.waiting_nodes) + " node(s) waiting to join"));
      stop_workers(kSigterm, AfterStop::kReform, /*peers_failed=*/false,
                   /*membership_change=*/true);
      return;
    case RoundSignal::kRestartRequested:
      notice("peer_failure",
             "workers failed on another node: stopping the worker group to restart");
      stop_workers(kSigterm, AfterStop::kReform, /*peers_failed=*/true);
      return;
    case RoundSignal::kJobFailed:
      notice("job_failed", "workers failed on another node and no restarts are left: stopping");
      stop_workers(kSigterm, AfterStop::kFailJob, /*peers_failed=*/true);
      return;
    case RoundSignal::kNone:
      return;
  }
}

void RoundMachine::stop_workers(int signal, AfterStop after, bool peers_failed,
                                bool membership_change) {
  // Stopping the group ends a hung worker too: its agent no longer waits to signal it.
  watch_.awaiting_peer_stacks = false;
  workers_ = Workers::kStopping;
  after_stop_ = after;
  emit(StopWorkers{signal, peers_failed, membership_change});
}

void RoundMachine::reform(MachineTime now) {
  cancel_group(Group::kWatch);
  cancel_group(Group::kReport);
  report_.reset();
  stopped_failures_.clear();
  watch_ = Watch{};
  join_.deadline = now + config_.settings.join_timeout;
  begin_join(now);
}

void RoundMachine::on_running_reply(const Pending& pending, const KvResult& result,
                                    MachineTime now) {
  if (!on_watch_reply(pending, result, now) && !on_round_state_reply(pending, result, now)) {
    on_ending_reply(pending, result, now);
  }
}

// Heartbeats, loss, wake-ups and hangs while the round runs.
bool RoundMachine::on_watch_reply(const Pending& pending, const KvResult& result, MachineTime now) {
  switch (pending.step) {
    case Step::kBeat:
      watch_.beat_outstanding = false;
      return true;
    case Step::kProbe:
      probe_answered(answer_as<KvLiveness>(result, "a heartbeat probe"), now);
      return true;
    case Step::kLossCheckExit:
      if (checked_counter(counter_of(result), 0, kMaxCount, keys_.exit_count(current_->round),
                          "finished nodes") > 0) {
        notice("node_left", "the next node of the ring finished its workers and left");
      } else {
        declare_loss(now);
      }
      return true;
    case Step::kSuspectWaiting:
    case Step::kSuspectLost:
      suspicion_checked(pending, result);
      return true;
    case Step::kSuspectClaim:
      suspicion_claimed(result);
      return true;
    case Step::kLostAdd:
    case Step::kInterrupt:
    case Step::kAllLeftSetForLost:
      return true;
    case Step::kLeftAddForLost:
      if (checked_counter(counter_of(result), 0, kMaxCount, keys_.left(current_->round),
                          "nodes that left") >= current_->assignment.group_world_size) {
        issue(Step::kAllLeftSetForLost, KvSet{keys_.all_left(current_->round), "1"}, Group::kWatch);
      }
      return true;
    case Step::kLostRecordRead: {
      const int slot = static_cast<int>(pending.aux);
      std::string who = "in slot " + std::to_string(slot);
      if (const auto& text = value_of(result)) {
        try {
          who = decode_node_record(*text, keys_.node(current_->round, slot)).addr;
        } catch (const RendezvousError&) {
          // The record is only for the message.
        }
      }
      notice("node_lost", "node " + who + " stopped beating its heartbeat for " +
                              common::seconds_text(config_.settings.keep_alive_interval *
                                                   config_.settings.keep_alive_max_attempt) +
                              " s: declared lost");
      return true;
    }
    case Step::kWakeWait:
      if (ready_of(result)) {
        read_round_state();
      } else {
        issue(Step::kWakeWait,
              KvWait{{keys_.wake(current_->round, current_->slot)}, to_millis(config_.wake_wait)},
              Group::kWatch);
      }
      return true;
    case Step::kHangPublish:
    case Step::kHangAck:
      return true;
    case Step::kHangAcksWait:
      release_hung_worker(ready_of(result));
      return true;
    case Step::kHangWait:
      if (ready_of(result)) {
        issue(Step::kHangRead, KvGet{keys_.hang(current_->round)}, Group::kWatch);
      } else {
        wait_for_peer_hang();
      }
      return true;
    case Step::kHangRead:
      if (const auto& text = value_of(result); text && !watch_.hang_published) {
        capture_for_peer_hang(*text);
      }
      return true;
    default:
      return false;
  }
}

// The round's state (a failure decision, lost and waiting nodes), read after a wake-up: the last
// of its three replies acts on it.
bool RoundMachine::on_round_state_reply(const Pending& pending, const KvResult& result,
                                        MachineTime now) {
  switch (pending.step) {
    case Step::kStateFailed:
      if (const auto& text = value_of(result)) {
        watch_.seen.failure = parse_failure_decision(*text);
        if (!watch_.seen.failure) {
          throw CorruptRecord(keys_.failed(current_->round),
                              "holds " + shown_value(*text) + ", not a failure decision");
        }
      }
      break;
    case Step::kStateLost:
      watch_.seen.lost_nodes = checked_counter(counter_of(result), 0, kMaxCount,
                                               keys_.lost(current_->round), "lost nodes");
      break;
    case Step::kStateWaiting:
      watch_.seen.waiting_nodes = checked_counter(counter_of(result), 0, kMaxCount,
                                                  keys_.waiting(current_->round), "waiting nodes");
      break;
    default:
      return false;
  }
  if (--watch_.state_replies == 0) {
    round_state_read(now);
  }
  return true;
}

// A hang, on the node that has it: publish it, so the others (waiting on the key) capture
// their stacks while their ranks still wait on the hung one, and wait (bounded) for every
// node's acknowledgement. This node's own comes with the StacksCaptured of its watchdog's
// capture, which started with the hang; so a second node that hangs at the same moment, and
// captures for itself instead of for this one, is waited for too.
void RoundMachine::hang_detected(const std::string& report) {
  const bool can_wait = phase_ == Phase::kRunning && workers_ == Workers::kRunning && current_ &&
                        participants() > 1 && !report_;
  if (watch_.hang_published) {
    // A later hang of this round: the others captured for the first one already, or are still
    // capturing, and then the answer owed for the first covers this one too.
    if (!watch_.awaiting_peer_stacks) {
      emit(PeersCapturedStacks{});
    }
    return;
  }
  if (!can_wait) {
    emit(PeersCapturedStacks{});  // alone, or not running: nobody to wait for
    return;
  }
  const Formed& f = *current_;
  const uint64_t r = f.round;
  watch_.hang_published = true;
  watch_.awaiting_peer_stacks = true;
  watch_.stacks_asked = true;  // by the hang itself: the watchdog captures
  issue(Step::kHangPublish, KvSet{keys_.hang(r), report}, Group::kWatch);
  issue(Step::kHangAcksWait,
        KvWait{keys_.for_slots(participants(), [&](int slot) { return keys_.hang_ack(r, slot); }),
               to_millis(config_.peer_stacks_wait)},
        Group::kWatch);
}

void RoundMachine::release_hung_worker(bool peers_answered) {
  if (!watch_.awaiting_peer_stacks) {
    return;
  }
  watch_.awaiting_peer_stacks = false;
  if (!peers_answered) {
    notice("hang_stacks", "not every other node captured its stacks within " +
                              std::to_string(static_cast<int>(config_.peer_stacks_wait.count())) +
                              " s; signalling the hung worker anyway");
  }
  emit(PeersCapturedStacks{});
}

void RoundMachine::wait_for_peer_hang() {
  issue(Step::kHangWait, KvWait{{keys_.hang(current_->round)}, to_millis(config_.wake_wait)},
        Group::kWatch);
}

// Another node's hang: capture this node's stacks, or acknowledge at once when this node has
// no running workers to capture.
void RoundMachine::capture_for_peer_hang(const std::string& stored_report) {
  if (watch_.stacks_asked) {
    return;
  }
  watch_.stacks_asked = true;
  if (workers_ != Workers::kRunning) {
    stacks_captured();
    return;
  }
  // The value comes from the store: keep the notice one short, printable line.
  std::string report = stored_report.substr(0, 200);
  for (char& c : report) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      c = '?';
    }
  }
  notice("peer_hang",
         "a worker hung on another node (" + report + "): capturing this node's workers' stacks");
  emit(CaptureStacks{std::move(report)});
}

void RoundMachine::stacks_captured() {
  if (!current_ || !watch_.stacks_asked || watch_.stacks_acked ||
      (phase_ != Phase::kRunning && phase_ != Phase::kExitBarrier)) {
    return;  // a late answer, from before the round moved on
  }
  watch_.stacks_acked = true;
  issue(Step::kHangAck, KvSet{keys_.hang_ack(current_->round, current_->slot), "1"}, Group::kWatch);
}

}  // namespace ddprun::rendezvous::round
