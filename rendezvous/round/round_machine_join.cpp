// Forming a round: the --nnodes check, c10d's join counter with last call and close, late and
// waiting nodes, static's fixed ranks, rank assignment and the workers' store address.
//
// Dynamic join of round r, per node: read whether the job is closed, agree on the expected
// count, take a slot from the join counter and publish the node record; then the join policy
// decides (wait for the close, claim it, read the count). The closing node publishes every
// node's assignment; each node reads its own. A node past the closed count is late: it counts
// itself as waiting, wakes the round if it can grow, and joins the next round once this one
// ends.

#include <algorithm>

#include "common/overloaded.hpp"
#include "rendezvous/round/record_checks.hpp"
#include "rendezvous/round/reply.hpp"
#include "rendezvous/round/round_machine.hpp"

namespace ddprun::rendezvous::round {
namespace {

using common::seconds_text;

}  // namespace

void RoundMachine::begin_join(MachineTime now) {
  if (config_.node_check_interval && !node_check_passed_) {
    check_node();
    return;
  }
  node_check_passed_ = false;  // the next join checks again
  if (!config_checked_) {
    if (elastic()) {
      // The --nnodes claim and the first round's claim do not depend on each other: both go
      // out at once (one round trip to the store instead of two), and on a mismatch the
      // round claim's answer names the round to fail.
      phase_ = Phase::kCheckingConfig;
      join_.replies_outstanding = 2;
      issue(Step::kConfigClaim,
            KvCompareSet{keys_.config(), std::nullopt,
                         nnodes_text(config_.self.min_nodes, config_.self.max_nodes)});
      issue(Step::kRoundClaim, KvCompareSet{keys_.round(), std::nullopt, "0"}, Group::kFlow, -1);
    } else {
      // Static rounds count restarts: round r is the job's r-th restart.
      phase_ = Phase::kStaticJoining;
      issue(Step::kStaticRound, KvAdd{keys_.restarts(), 0});
    }
    return;
  }
  if (elastic()) {
    begin_dynamic_round(now);
  } else {
    begin_static_round(current_ ? current_->round + 1 : join_.round, now);
  }
}

void RoundMachine::check_node() {
  phase_ = Phase::kNodeCheck;
  node_check_retry_.reset();
  emit(CheckNode{current_ ? current_->round + 1 : join_.round});
}

void RoundMachine::node_checked(const NodeChecked& checked, MachineTime now) {
  if (phase_ != Phase::kNodeCheck || node_check_retry_) {
    return;  // no check runs
  }
  if (checked.passed) {
    node_check_passed_ = true;
    // join_timeout counts from the join, not from a first check that failed for hours.
    join_.deadline = now + config_.settings.join_timeout;
    begin_join(now);
    return;
  }
  const uint64_t round = current_ ? current_->round + 1 : join_.round;
  emit(Notice{"node_check_failed",
              "node check failed on " + config_.self.addr + ": " + checked.reason +
                  "; not joining round " + std::to_string(round) + ", retrying in " +
                  seconds_text(*config_.node_check_interval) + " s",
              round});
  node_check_retry_ = now + *config_.node_check_interval;
}

void RoundMachine::check_config_reply(const std::string& stored) {
  const NnodesText theirs = parse_nnodes_text(stored, keys_.config());
  const std::string mine = nnodes_text(config_.self.min_nodes, config_.self.max_nodes);
  if (stored == mine) {
    config_checked_ = true;
    return;
  }
  mismatch_message_ =
      "agents disagree on --nnodes: " + config_.self.addr +
      (elastic() ? " (pid " + std::to_string(config_.self.pid) + ")"
                 : " (--node_rank " + std::to_string(config_.self.rank_hint.value_or(0)) + ")") +
      " has --nnodes " + mine + " but the " + config_.where + " was started with --nnodes " +
      stored;
  if (elastic()) {
    return;  // the round now forming fails too, once the round claim names it
  }
  // Node 0 waits for every slot's record: fill them with the error so it fails now, not after
  // join_timeout.
  const int slots = std::clamp(std::max(theirs.max_nodes, config_.self.max_nodes), 1, 1 << 16);
  auto record_keys = keys_.for_slots(slots, [&](int s) { return keys_.node(join_.round, s); });
  const auto count = record_keys.size();
  issue(Step::kMismatchStaticFill,
        KvMultiSet{std::move(record_keys),
                   std::vector<std::string>(count, "error " + mismatch_message_)});
}

void RoundMachine::begin_dynamic_round(MachineTime /*now*/) {
  phase_ = Phase::kJoining;
  join_.replies_outstanding = 1;
  if (current_) {
    const uint64_t p = current_->round;
    // Releases the nodes that wait for this round to end (late arrivals, spares). Claimed,
    // not set: on etcd the first agent's write is the one raft write of the re-form, and the
    // others' reads share a txn with the counts and the round claim issued beside them.
    issue(Step::kReformSet, KvCompareSet{keys_.reform(p), std::nullopt, "1"});
    issue(Step::kPrevLost, KvCountTickets{keys_.lost(p)});
    issue(Step::kPrevWaiting, KvCountTickets{keys_.waiting(p)});
    join_.replies_outstanding = 3;
    issue(Step::kRoundClaim, KvCompareSet{keys_.round(), std::to_string(p), std::to_string(p + 1)},
          Group::kFlow, static_cast<int64_t>(p));
  } else {
    issue(Step::kRoundClaim, KvCompareSet{keys_.round(), std::nullopt, "0"}, Group::kFlow, -1);
  }
}

void RoundMachine::join_round(uint64_t round, MachineTime /*now*/) {
  phase_ = Phase::kJoining;
  join_.round = round;
  join_.slot = 0;
  join_.closed_by_me = false;
  join_.job_closed = false;
  join_.decisions.reset();
  join_.replies_outstanding = 3;
  issue(Step::kJobClosedCheck, KvGet{keys_.job_closed()});
  if (join_.expected > 0) {
    issue(Step::kExpectedClaim,
          KvCompareSet{keys_.expected(round), std::nullopt, std::to_string(join_.expected)});
  }
  issue(Step::kJoinedAdd, KvTakeTicket{keys_.joined(round), config_.self.nonce});
  if (join_.expected == 0) {
    issue(Step::kExpectedRead, KvGet{keys_.expected(round)});
  }
}

void RoundMachine::join_replies_done(MachineTime now) {
  if (join_.job_closed) {
    if (join_.job_succeeded && !current_) {
      // A spare that never took part (torchrun's graceful exit of a redundant node).
      notice("job_closed", "the job finished before this node could join it");
      finish(kExitSuccess, "the job finished without this node");
      return;
    }
    throw RendezvousError(config_.where + " is closed: the job has ended");
  }
  JoinPolicy policy{config_.self.min_nodes, config_.self.max_nodes, join_.expected,
                    config_.settings.last_call_timeout};
  join_.decisions.emplace(policy, join_.deadline);
  act(join_.decisions->on_joined(join_.slot, now), now);
}

void RoundMachine::act(const JoinAction& action, MachineTime now) {
  const uint64_t r = join_.round;
  std::visit(
      common::Overloaded{
          [&](const AwaitClose& a) {
            issue(Step::kAwaitClose, KvWait{{keys_.closed(r)}, to_millis(a.until - now)});
          },
          [&](const CloseRound& c) {
            // Claim with compare-and-set (exclusive), publish with set.
            issue(Step::kCloseClaim,
                  KvCompareSet{keys_.close_claim(r), std::nullopt, config_.self.nonce},
                  Group::kFlow, c.participants);
          },
          [&](const ReadJoinedCount&) {
            issue(Step::kJoinedCount, KvCountTickets{keys_.joined(r)});
          },
          [&](const BecomeParticipant& p) {
            phase_ = Phase::kForming;
            current_ = Formed{r, p.slot, {}, {}, 0};
            signal_ = RoundSignal::kNone;
            const auto close_wait = to_millis(config_.settings.close_timeout);
            if (join_.closed_by_me) {
              issue(Step::kRecordsWait,
                    KvWait{keys_.for_slots(p.participants, [&](int s) { return keys_.node(r, s); }),
                           close_wait},
                    Group::kFlow, p.participants);
            }
            issue(Step::kAssignWait, KvWait{{keys_.assignment(r, p.slot)}, close_wait});
          },
          [&](const BecomeLate& l) { become_late(l.participants, now); },
          [&](const JoinTimedOut&) { issue(Step::kTimeoutCount, KvCountTickets{keys_.joined(r)}); },
      },
      action);
}

void RoundMachine::become_late(int participants, MachineTime now) {
  // The round closed without us: register as waiting, wake it if it can grow, then wait for
  // its participants to leave it and try the next one.
  phase_ = Phase::kLate;
  const uint64_t r = join_.round;
  issue(Step::kWaitingAdd, KvTakeTicket{keys_.waiting(r), config_.self.nonce});
  if (waiting_node_wakes_round(participants, config_.self.max_nodes)) {
    auto wake_keys = keys_.for_slots(participants, [&](int s) { return keys_.wake(r, s); });
    const auto count = wake_keys.size();
    issue(Step::kWakeRound,
          KvMultiSet{std::move(wake_keys), std::vector<std::string>(count, "waiting")});
  }
  issue(Step::kReformWait, KvWait{{keys_.reform(r)}, to_millis(join_.deadline - now)});
}

void RoundMachine::join_timed_out(int joined) {
  throw RendezvousError(config_.where + ": timed out after " +
                        seconds_text(config_.settings.join_timeout) +
                        " s (join_timeout) waiting for " + std::to_string(config_.self.min_nodes) +
                        " nodes to join round " + std::to_string(join_.round) + " (" +
                        std::to_string(joined) + " joined)");
}

void RoundMachine::begin_static_round(uint64_t round, MachineTime now) {
  phase_ = Phase::kStaticJoining;
  join_.round = round;
  const int rank = config_.self.rank_hint.value_or(0);
  const int nodes = config_.self.max_nodes;  // torchrun: the static world is MAX nodes
  const int slot = rank + 1;
  join_.slot = slot;
  NodeRecord record = config_.self;
  record.rank_hint = rank;
  issue(Step::kRecordSet, KvSet{keys_.node(round, slot), encode_node_record(record)});
  const auto join_wait = to_millis(join_.deadline - now);
  if (rank == 0) {
    issue(Step::kStaticRecordsWait,
          KvWait{keys_.for_slots(nodes, [&](int s) { return keys_.node(round, s); }), join_wait},
          Group::kFlow, nodes);
  }
  issue(Step::kAssignWait, KvWait{{keys_.assignment(round, slot)}, join_wait});
}

void RoundMachine::publish_assignments(const std::vector<std::optional<std::string>>& texts,
                                       int64_t restarts) {
  const uint64_t r = join_.round;
  const int n = static_cast<int>(texts.size());
  auto assign_keys = keys_.for_slots(n, [&](int s) { return keys_.assignment(r, s); });
  std::vector<std::string> values;
  try {
    std::vector<NodeRecord> records;
    records.reserve(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (!texts[i]) {
        throw RendezvousError("the record of slot " + std::to_string(i + 1) + " of round " +
                              std::to_string(r) + " vanished from the store");
      }
      records.push_back(decode_node_record(*texts[i], keys_.node(r, static_cast<int>(i) + 1)));
    }
    const auto assignments = elastic() ? assign_dynamic_ranks(records, static_cast<int>(restarts))
                                       : assign_static_ranks(records, static_cast<int>(restarts));
    for (const auto& a : assignments) {
      values.push_back(encode_assignment(a));
    }
  } catch (const CorruptRecord& corrupt) {
    // Every participant raises the same error instead of waiting for an assignment.
    values.assign(assign_keys.size(), encode_assignment_error(corrupt_rendezvous_message(
                                          config_.run_id, corrupt.what())));
  } catch (const RendezvousError& error) {
    values.assign(assign_keys.size(), encode_assignment_error(error.what()));
  }
  issue(Step::kAssignPublish, KvMultiSet{std::move(assign_keys), std::move(values)});
  if (!elastic()) {
    issue(Step::kClosedSet, KvSet{keys_.closed(r), std::to_string(n)});
  }
}

void RoundMachine::assignment_read(const std::string& text, MachineTime now) {
  const std::string key = keys_.assignment(join_.round, join_.slot);
  const Assignment assignment = decode_assignment(text, key);
  // A round of more nodes than --nnodes allows, or without this node's slot, was not formed
  // by an agent of this job.
  if (assignment.group_world_size > config_.self.max_nodes ||
      join_.slot > assignment.group_world_size ||
      (assignment.group_world_size > 1 && assignment.neighbor_slot == join_.slot) ||
      ((assignment.rank0_slot == join_.slot) != (assignment.group_rank == 0))) {
    throw CorruptRecord(key, "holds " + shown_value(text) + ", a rank assignment for slot " +
                                 std::to_string(join_.slot) + " that does not fit --nnodes " +
                                 nnodes_text(config_.self.min_nodes, config_.self.max_nodes));
  }
  if (!current_ || current_->round != join_.round) {
    current_ = Formed{join_.round, join_.slot, {}, {}, 0};
  }
  current_->assignment = assignment;
  phase_ = Phase::kForming;
  if (!elastic()) {
    workers_store_known(config_.static_master_addr, config_.static_master_port, now);
  } else if (assignment.group_rank == 0) {
    emit(HostWorkersStore{current_->round});
  } else {
    issue(Step::kMasterWait,
          KvWait{{keys_.master(current_->round)}, to_millis(config_.settings.close_timeout)});
  }
}

void RoundMachine::closed_read(const std::string& text, MachineTime now) {
  const uint64_t r = join_.round;
  if (text.starts_with("error ")) {
    throw RendezvousError(published_error(std::string_view(text).substr(6), keys_.closed(r)));
  }
  // Agents that disagree on --nnodes never get this far (the config check): a count
  // outside this node's --nnodes was not written by an agent of this job.
  const int n =
      parse_count(text, 1, config_.self.max_nodes, keys_.closed(r), "nodes in a round (--nnodes)");
  act(join_.decisions->on_closed(n), now);
}

void RoundMachine::master_read(const std::string& text, MachineTime now) {
  const std::string key = keys_.master(current_->round);
  const auto space = text.rfind(' ');
  if (space == std::string::npos || space == 0 || text.size() > kMaxAddressBytes ||
      text.find_first_of(std::string_view("\0\t\n\r", 4)) != std::string::npos) {
    throw CorruptRecord(key, "holds " + shown_value(text) + ", not a host and port");
  }
  const int port = parse_count(std::string_view(text).substr(space + 1), 1, 65535, key,
                               "a port of the workers' store");
  workers_store_known(text.substr(0, space), static_cast<uint16_t>(port), now);
}

void RoundMachine::workers_store_known(std::string addr, uint16_t port, MachineTime now) {
  current_->master_addr = std::move(addr);
  current_->master_port = port;
  start_round(now);
}

void RoundMachine::on_reply(const Pending& pending, const KvResult& result, MachineTime now) {
  for (const auto handler : {&RoundMachine::on_config_reply, &RoundMachine::on_join_count_reply,
                             &RoundMachine::on_close_reply, &RoundMachine::on_static_join_reply,
                             &RoundMachine::on_assignment_reply}) {
    switch ((this->*handler)(pending, result, now)) {
      case Handled::kNotMine:
        continue;
      case Handled::kDone:
        return;
      case Handled::kCountsDown:
        count_down_join_replies(pending.step, now);
        return;
    }
  }
  on_running_reply(pending, result, now);
}

// The --nnodes check: does every agent agree?
RoundMachine::Handled RoundMachine::on_config_reply(const Pending& pending, const KvResult& result,
                                                    MachineTime now) {
  switch (pending.step) {
    case Step::kConfigClaim:
      check_config_reply(value_of(result).value_or(""));
      if (elastic()) {
        return Handled::kCountsDown;  // with the first round's claim
      }
      if (config_checked_) {
        begin_static_round(join_.round, now);
      }
      return Handled::kDone;
    case Step::kMismatchCloseClaim:
      check_token(value_of(result), keys_.close_claim(static_cast<uint64_t>(pending.aux)));
      if (value_of(result) == config_.self.nonce) {
        issue(Step::kMismatchClosed, KvSet{keys_.closed(static_cast<uint64_t>(pending.aux)),
                                           "error " + mismatch_message_});
        return Handled::kDone;
      }
      throw RendezvousError(mismatch_message_);
    case Step::kMismatchClosed:
    case Step::kMismatchStaticFill:
      throw RendezvousError(mismatch_message_);
    default:
      return Handled::kNotMine;
  }
}

// The dynamic join: the round, the previous round's counts, the expected and joined nodes.
RoundMachine::Handled RoundMachine::on_join_count_reply(const Pending& pending,
                                                        const KvResult& result,
                                                        MachineTime /*now*/) {
  const uint64_t r = join_.round;
  switch (pending.step) {
    case Step::kRoundClaim: {
      uint64_t round = parse_round_number(value_of(result), keys_.round());
      if (pending.aux >= 0) {
        // The key was behind (it only ever moves forward for live rounds).
        round = std::max(round, static_cast<uint64_t>(pending.aux) + 1);
      }
      join_.round = round;
      return Handled::kCountsDown;
    }
    case Step::kPrevLost:
      join_.prev_lost = static_cast<int>(checked_counter(
          counter_of(result), 0, kMaxCount, keys_.lost(current_->round), "lost nodes"));
      return Handled::kCountsDown;
    case Step::kPrevWaiting:
      join_.prev_waiting = static_cast<int>(checked_counter(
          counter_of(result), 0, kMaxCount, keys_.waiting(current_->round), "waiting nodes"));
      return Handled::kCountsDown;
    case Step::kJobClosedCheck: {
      const auto& outcome = value_of(result);
      if (outcome && *outcome != "0" && *outcome != "1") {
        throw CorruptRecord(keys_.job_closed(),
                            "holds " + shown_value(*outcome) + ", not a job's outcome");
      }
      join_.job_closed = outcome.has_value();
      join_.job_succeeded = outcome == std::optional<std::string>("0");
      return Handled::kCountsDown;
    }
    case Step::kExpectedClaim:
      join_.expected = parse_count(value_of(result).value_or(""), 1, kMaxCount, keys_.expected(r),
                                   "expected nodes");
      return Handled::kCountsDown;
    case Step::kExpectedRead:
      if (const auto& v = value_of(result)) {
        join_.expected = parse_count(*v, 1, kMaxCount, keys_.expected(r), "expected nodes");
      }
      return Handled::kCountsDown;
    case Step::kJoinedAdd:
      join_.slot = static_cast<int>(
          checked_counter(counter_of(result), 1, kMaxCount, keys_.joined(r), "joined nodes"));
      issue(Step::kRecordSet, KvSet{keys_.node(r, join_.slot), encode_node_record(config_.self)});
      return Handled::kCountsDown;
    default:
      return Handled::kNotMine;
  }
}

// The dynamic join's close: waiting for it, claiming it, timing out, joining late.
RoundMachine::Handled RoundMachine::on_close_reply(const Pending& pending, const KvResult& result,
                                                   MachineTime now) {
  const uint64_t r = join_.round;
  switch (pending.step) {
    case Step::kAwaitClose:
      // The closed key is written once (by the close claim's winner).
      if (!ready_of(result)) {
        act(join_.decisions->on_wait_expired(now), now);
      } else if (const auto* closed = waited_value(result)) {
        closed_read(*closed, now);
      } else {
        issue(Step::kClosedRead, KvGet{keys_.closed(r)});
      }
      return Handled::kDone;
    case Step::kClosedRead:
      closed_read(value_of(result).value_or(""), now);
      return Handled::kDone;
    case Step::kCloseClaim:
      check_token(value_of(result), keys_.close_claim(r));
      if (value_of(result) == config_.self.nonce) {
        join_.closed_by_me = true;
        issue(Step::kClosedSet, KvSet{keys_.closed(r), std::to_string(pending.aux)});
        act(join_.decisions->on_closed(static_cast<int>(pending.aux)), now);
      } else {
        act(AwaitClose{join_.deadline}, now);
      }
      return Handled::kDone;
    case Step::kClosedSet:
    case Step::kRecordSet:
    case Step::kReformSet:
    case Step::kWaitingAdd:
    case Step::kWakeRound:
    case Step::kAssignPublish:
    case Step::kMasterSet:
      return Handled::kDone;
    case Step::kJoinedCount:
      act(join_.decisions->on_joined_count(static_cast<int>(
              checked_counter(counter_of(result), 0, kMaxCount, keys_.joined(r), "joined nodes"))),
          now);
      return Handled::kDone;
    case Step::kTimeoutCount:
      join_timed_out(static_cast<int>(
          checked_counter(counter_of(result), 0, kMaxCount, keys_.joined(r), "joined nodes")));
      return Handled::kDone;
    case Step::kReformWait:
      require_ready(result, config_.where,
                    "timed out after " + seconds_text(config_.settings.join_timeout) +
                        " s (join_timeout) waiting as a spare for round " + std::to_string(r) +
                        " to end");
      issue(Step::kRoundAdvanceLate,
            KvCompareSet{keys_.round(), std::to_string(r), std::to_string(r + 1)});
      return Handled::kDone;
    case Step::kRoundAdvanceLate:
      join_.expected = 0;
      join_round(std::max(parse_round_number(value_of(result), keys_.round()), r + 1), now);
      return Handled::kDone;
    default:
      return Handled::kNotMine;
  }
}

// The static join: node 0 assigns the fixed ranks.
RoundMachine::Handled RoundMachine::on_static_join_reply(const Pending& pending,
                                                         const KvResult& result,
                                                         MachineTime /*now*/) {
  const uint64_t r = join_.round;
  switch (pending.step) {
    case Step::kStaticRound:
      join_.round = static_cast<uint64_t>(
          checked_counter(counter_of(result), 0, kMaxRestarts, keys_.restarts(), "restarts"));
      issue(Step::kConfigClaim,
            KvCompareSet{keys_.config(), std::nullopt,
                         nnodes_text(config_.self.min_nodes, config_.self.max_nodes)});
      return Handled::kDone;
    case Step::kStaticRecordsWait: {
      auto record_keys =
          keys_.for_slots(static_cast<int>(pending.aux), [&](int s) { return keys_.node(r, s); });
      if (ready_of(result)) {
        issue(Step::kRecordsRead, KvMultiGet{std::move(record_keys)}, Group::kFlow, pending.aux);
        issue(Step::kRestartsRead, KvAdd{keys_.restarts(), 0});
        join_.replies_outstanding = 2;
      } else {
        issue(Step::kStaticCountPresent, KvMultiGet{std::move(record_keys)}, Group::kFlow,
              pending.aux);
      }
      return Handled::kDone;
    }
    case Step::kStaticCountPresent: {
      const auto& values = values_of(result);
      const auto present =
          std::count_if(values.begin(), values.end(), [](const auto& v) { return v.has_value(); });
      const std::string message = config_.where + ": timed out after " +
                                  seconds_text(config_.settings.join_timeout) +
                                  " s (join_timeout): " + std::to_string(present) + " of " +
                                  std::to_string(pending.aux) + " nodes (--nnodes) joined";
      auto assign_keys = keys_.for_slots(static_cast<int>(pending.aux),
                                         [&](int s) { return keys_.assignment(r, s); });
      const auto count = assign_keys.size();
      issue(Step::kAssignPublish,
            KvMultiSet{std::move(assign_keys),
                       std::vector<std::string>(count, encode_assignment_error(message))});
      throw RendezvousError(message);
    }
    default:
      return Handled::kNotMine;
  }
}

// The assignment and the workers' store.
RoundMachine::Handled RoundMachine::on_assignment_reply(const Pending& pending,
                                                        const KvResult& result, MachineTime now) {
  const uint64_t r = join_.round;
  switch (pending.step) {
    case Step::kRecordsWait: {
      const int n = static_cast<int>(pending.aux);
      if (!ready_of(result)) {
        const std::string message = config_.where + ": a node took a slot in round " +
                                    std::to_string(r) +
                                    " but did not publish its record within close_timeout";
        auto assign_keys = keys_.for_slots(n, [&](int s) { return keys_.assignment(r, s); });
        const auto count = assign_keys.size();
        issue(Step::kAssignPublish,
              KvMultiSet{std::move(assign_keys),
                         std::vector<std::string>(count, encode_assignment_error(message))});
        return Handled::kDone;
      }
      issue(Step::kRecordsRead,
            KvMultiGet{keys_.for_slots(n, [&](int s) { return keys_.node(r, s); })});
      issue(Step::kRestartsRead, KvAdd{keys_.restarts(), 0});
      join_.replies_outstanding = 2;
      return Handled::kDone;
    }
    case Step::kRecordsRead:
      records_ = values_of(result);
      if (--join_.replies_outstanding == 0) {
        publish_assignments(records_, restarts_read_);
      }
      return Handled::kDone;
    case Step::kRestartsRead:
      restarts_read_ =
          checked_counter(counter_of(result), 0, kMaxRestarts, keys_.restarts(), "restarts");
      if (--join_.replies_outstanding == 0) {
        publish_assignments(records_, restarts_read_);
      }
      return Handled::kDone;
    case Step::kAssignWait:
      require_ready(
          result, config_.where,
          "no rank assignment for round " + std::to_string(r) + " within " +
              (elastic() ? seconds_text(config_.settings.close_timeout) + " s (close_timeout)"
                         : seconds_text(config_.settings.join_timeout) + " s (join_timeout)"));
      // Assignments are written once (by the round's closer, or its node 0 when static).
      if (const auto* assignment = waited_value(result)) {
        assignment_read(*assignment, now);
      } else {
        issue(Step::kAssignRead, KvGet{keys_.assignment(r, join_.slot)});
      }
      return Handled::kDone;
    case Step::kAssignRead:
      assignment_read(value_of(result).value_or(""), now);
      return Handled::kDone;
    case Step::kMasterWait:
      require_ready(result, config_.where,
                    "the round's rank 0 did not publish the workers' store within "
                    "close_timeout");
      // The workers' store address is written once (by the round's rank 0).
      if (const auto* master = waited_value(result)) {
        master_read(*master, now);
      } else {
        issue(Step::kMasterRead, KvGet{keys_.master(current_->round)});
      }
      return Handled::kDone;
    case Step::kMasterRead:
      master_read(value_of(result).value_or(""), now);
      return Handled::kDone;
    default:
      return Handled::kNotMine;
  }
}

// A reply that counts down the join's outstanding replies; the last one moves the join on.
void RoundMachine::count_down_join_replies(Step step, MachineTime now) {
  if (--join_.replies_outstanding > 0) {
    return;
  }
  if (phase_ == Phase::kCheckingConfig) {
    if (!config_checked_) {
      // Fail the round now forming too, so nobody waits for a node that will never come.
      issue(Step::kMismatchCloseClaim,
            KvCompareSet{keys_.close_claim(join_.round), std::nullopt, config_.self.nonce},
            Group::kFlow, static_cast<int64_t>(join_.round));
      return;
    }
    join_.expected = 0;
    join_round(join_.round, now);
    return;
  }
  if (step == Step::kRoundClaim || step == Step::kPrevLost || step == Step::kPrevWaiting) {
    if (current_) {
      join_.expected =
          next_round_expected_nodes(current_->assignment.group_world_size, join_.prev_lost,
                                    join_.prev_waiting, config_.self.max_nodes);
    } else {
      join_.expected = 0;
    }
    join_round(join_.round, now);
    return;
  }
  join_replies_done(now);
}

}  // namespace ddprun::rendezvous::round
