#include "agent/rdzv_store_rendezvous.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>

#include "agent/rdzv_state_machine.hpp"

namespace ddprun::agent::rdzv {
namespace {

// Below this much join time left, another connect attempt is not worth it.
constexpr double kConnectRetryFloorS = 0.05;
// How long a client keeps trying to reconnect to the store before the operation fails.
constexpr double kReconnectBudgetS = 5.0;
// The value of interrupt keys (wake keys and the exit-barrier release).
constexpr char kInterrupted[] = "interrupted";

}  // namespace

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::string random_hex(std::size_t bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::random_device device;
  std::string out;
  out.reserve(bytes * 2);
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto byte = device() & 0xffU;
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0xfU]);
  }
  return out;
}

StoreRendezvous::StoreRendezvous(const launcher::LaunchConfig& config, RdzvSettings settings,
                                 StoreEndpoint endpoint, std::string run_id, std::string local_addr)
    : config_(config),
      settings_(settings),
      endpoint_(std::move(endpoint)),
      run_id_(std::move(run_id)),
      keys_(run_id_) {
  self_.addr = std::move(local_addr);
  self_.pid = getpid();
  self_.nonce = random_hex(8);
  self_.nproc_per_node = config.nproc_per_node;
  self_.rank_hint = config.node_rank_hint;
  self_.min_nodes = config.min_nodes;
  self_.max_nodes = config.max_nodes;
  rendezvous::store::StoreClientOptions options;
  options.host = endpoint_.host;
  options.port = endpoint_.port;
  options.op_timeout = millis(settings_.read_timeout_s);
  // An unreachable endpoint is a join that never starts: keep trying until join_timeout. The
  // client gives up once its next backoff would pass its own limit, so go round again with
  // what is left.
  const double deadline = now_s() + settings_.join_timeout_s;
  for (;;) {
    // Also the client's budget for reconnecting later: short, since a broken connection to an
    // in-process store means its agent is gone (the loop covers the initial join_timeout).
    options.connect_timeout = millis(std::min(deadline - now_s(), kReconnectBudgetS));
    try {
      client_ = rendezvous::store::StoreClient::connect(options);
      // Heartbeat writes must finish within heartbeat_timeout.
      options.op_timeout = millis(settings_.heartbeat_timeout_s);
      watch_client_ = rendezvous::store::StoreClient::connect(options);
      break;
    } catch (const rendezvous::store::StoreError& error) {
      if (deadline - now_s() < kConnectRetryFloorS) {
        throw RendezvousError("cannot reach the rendezvous store at " + endpoint_.text() +
                              " within " + seconds_text(settings_.join_timeout_s) +
                              " s (join_timeout): " + error.what());
      }
    }
  }
}

StoreRendezvous::~StoreRendezvous() {
  try {
    stop_watcher();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: rendezvous cleanup: %s\n", error.what());
  }
}

std::string StoreRendezvous::where() const {
  return "rendezvous '" + run_id_ + "' at " + endpoint_.text();
}

std::chrono::milliseconds StoreRendezvous::millis(double seconds) {
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(seconds * 1000)));
}

double StoreRendezvous::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
auto StoreRendezvous::guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const rendezvous::store::StoreError& error) {
    throw RendezvousError(std::string(what) + ": " + where() + ": " + error.what());
  }
}

void StoreRendezvous::stop_watcher() {
  if (!watcher_) {
    return;
  }
  if (!watcher_->woken()) {
    // Our own wake key: nobody else reads it, and it ends the watcher's blocked WAIT now.
    try {
      client_->set(watcher_->wake_key(), "stop");
    } catch (const rendezvous::store::StoreError&) {
      // The watcher ends within one check period on its own.
    }
  }
  watcher_->stop();
  watcher_.reset();
}

void StoreRendezvous::start_watcher(const FormedRound& round) {
  const int n = round.assignment.group_world_size;
  // Alone and full: nothing can interrupt this round but this node itself.
  if (n == 1 && config_.max_nodes == 1) {
    return;
  }
  WatchPlan plan;
  plan.wake_key = keys_.wake(round.round, round.slot);
  plan.interrupt_keys = keys_.for_slots(n, [&](int s) { return keys_.wake(round.round, s); });
  plan.interrupt_keys.push_back(keys_.exit_done(round.round));
  if (elastic() && n > 1) {
    plan.own_heartbeat_key = keys_.heartbeat(round.round, round.slot);
    plan.neighbor_heartbeat_key = keys_.heartbeat(round.round, round.assignment.neighbor_slot);
  }
  plan.lost_counter_key = keys_.lost(round.round);
  plan.left_counter_key = keys_.left(round.round);
  plan.all_left_key = keys_.all_left(round.round);
  plan.participants = n;
  plan.keep_alive_interval_s = settings_.keep_alive_interval_s;
  plan.keep_alive_max_attempt = settings_.keep_alive_max_attempt;
  plan.unresponsive_limit_s = settings_.read_timeout_s;
  watcher_ = std::make_unique<RoundWatcher>(std::move(plan), *watch_client_, wakeup_);
}

RoundInfo StoreRendezvous::next_round() {
  if (shut_down_) {
    throw RendezvousError(where() + ": this agent has left the rendezvous");
  }
  stop_watcher();
  wakeup_.drain();
  signal_ = RoundSignal::kNone;
  exit_barrier_attempted_ = false;
  if (current_) {
    // Releases the nodes that wait for this round to end (late arrivals, spares).
    guarded("leaving the round", [&] { client_->set(keys_.reform(current_->round), "1"); });
  }
  FormedRound formed = guarded("joining", [&] { return join(current_); });
  current_ = formed;
  start_watcher(formed);
  RoundInfo info;
  info.round = formed.round;
  info.group_rank = formed.assignment.group_rank;
  info.group_world_size = formed.assignment.group_world_size;
  info.base_global_rank = formed.assignment.base_global_rank;
  info.world_size = formed.assignment.world_size;
  info.restart_count = formed.assignment.restart_count;
  info.master_addr = formed.master_addr;
  info.master_port = formed.master_port;
  info.run_id = run_id_;
  return info;
}

RoundSignal StoreRendezvous::poll() {
  if (signal_ != RoundSignal::kNone || !current_ || !watcher_ ||
      !(watcher_->woken() || exit_barrier_attempted_)) {
    return signal_;
  }
  if (watcher_->store_lost()) {
    throw RendezvousError("lost the connection to the " + where());
  }
  const uint64_t r = current_->round;
  WakeObservation seen = guarded("reading the round's state", [&] {
    WakeObservation o;
    if (client_->check({keys_.failed(r)})) {
      o.failure = parse_failure_decision(client_->get(keys_.failed(r)));
    }
    o.lost_nodes = client_->add(keys_.lost(r), 0);
    o.waiting_nodes = client_->add(keys_.waiting(r), 0);
    return o;
  });
  seen.participants = current_->assignment.group_world_size;
  seen.max_nodes = config_.max_nodes;
  signal_ = decide_round_signal(seen);
  if (signal_ == RoundSignal::kNone) {
    wakeup_.drain();  // nothing to act on (e.g. a spare's wake-up at max_nodes)
  }
  return signal_;
}

bool StoreRendezvous::report_failure(const std::vector<WorkerFailure>& failures) {
  if (!current_) {
    throw RendezvousError("report_failure before any round formed");
  }
  const uint64_t r = current_->round;
  const int n = current_->assignment.group_world_size;
  const bool counted = guarded("publishing the failure", [&] {
    // Workers that fail in a round that already lost a node fail because of it (a peer's gloo
    // connection reset): a membership change, not a restart, unless a failure decision exists.
    if (elastic() && !client_->check({keys_.fail_claim(r)}) && client_->add(keys_.lost(r), 0) > 0) {
      return false;
    }
    return true;
  });
  if (!counted) {
    signal_ = RoundSignal::kMembershipChange;
    return true;
  }
  const FailureDecision decision = guarded("publishing the failure", [&] {
    if (!failures.empty()) {
      std::string lines;
      for (const auto& failure : failures) {
        lines += encode_failure_line(failure);
      }
      client_->append(keys_.failures(), lines);
    }
    // One decision per round however many nodes fail in it: the first claim counts the restart.
    const std::string claim = client_->compare_set(keys_.fail_claim(r), "", self_.nonce);
    if (claim != self_.nonce) {
      const auto published =
          parse_failure_decision(client_->get(keys_.failed(r), millis(settings_.close_timeout_s)));
      if (!published) {
        throw RendezvousError("malformed failure decision in the store");
      }
      return *published;
    }
    const int64_t restarts = client_->add(keys_.restarts(), 1);
    FailureDecision d = decide_failure(restarts, config_.max_restarts);
    if (client_->add(keys_.exit_count(r), 0) > 0) {
      // A node of this round already finished its workers: the gang cannot restart as one, so
      // the job fails now instead of waiting for a node that will never rejoin.
      d = FailureDecision::kExhausted;
    }
    client_->set(keys_.failed(r), to_string(d));
    auto interrupt_keys = keys_.for_slots(n, [&](int s) { return keys_.wake(r, s); });
    interrupt_keys.push_back(keys_.exit_done(r));  // releases nodes in the exit barrier
    client_->multi_set(interrupt_keys,
                       std::vector<std::string>(interrupt_keys.size(), kInterrupted));
    return d;
  });
  signal_ = decision == FailureDecision::kRestart ? RoundSignal::kRestartRequested
                                                  : RoundSignal::kJobFailed;
  return decision == FailureDecision::kRestart;
}

std::vector<WorkerFailure> StoreRendezvous::job_failures() {
  return guarded("reading the job's failures", [&] {
    if (!client_->check({keys_.failures()})) {
      return std::vector<WorkerFailure>{};
    }
    return decode_failure_lines(client_->get(keys_.failures()));
  });
}

void StoreRendezvous::exit_barrier(std::chrono::duration<double> timeout) {
  if (!current_) {
    return;
  }
  const uint64_t r = current_->round;
  const int n = current_->assignment.group_world_size;
  exit_barrier_attempted_ = true;
  try {
    if (client_->add(keys_.exit_count(r), 1) >= n) {
      client_->set(keys_.exit_done(r), "1");
    }
    if (!client_->wait({keys_.exit_done(r)}, millis(timeout.count()))) {
      std::fprintf(stderr, "ddprun: exit barrier: not every node finished within %.0f s\n",
                   timeout.count());
    } else if (client_->get(keys_.exit_done(r)) == kInterrupted) {
      // Another node failed or was lost after this node's workers succeeded: poll() tells
      // which, and the others are not waited for.
      std::fprintf(stderr, "ddprun: exit barrier: another node failed or left the round\n");
      if (watcher_ && !watcher_->woken()) {
        wakeup_.signal();  // poll() reads the round's state even before our watcher wakes
      }
    }
  } catch (const rendezvous::store::StoreError& error) {
    // As torchrun: the barrier is best effort, the workers already succeeded.
    std::fprintf(stderr, "ddprun: exit barrier: %s: %s\n", where().c_str(), error.what());
  }
}

void StoreRendezvous::shutdown(bool close_rendezvous) {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  stop_watcher();
  if (!current_) {
    return;
  }
  const uint64_t r = current_->round;
  const int n = current_->assignment.group_world_size;
  try {
    if (close_rendezvous) {
      client_->set(keys_.job_closed(), "1");
      client_->set(keys_.reform(r), "closed");  // releases waiting nodes, who then see closed
      // A node that re-joined after a failure this node did not take part in waits in a newer
      // round: fail it now instead of at join_timeout.
      close_later_rounds(r, "error " + where() + " is closed: " + self_.addr + " ended the job");
    } else if (elastic() && signal_ == RoundSignal::kNone && n > 1) {
      // Stopped by a signal: leave like a lost node, at once, so the others scale down.
      client_->add(keys_.lost(r), 1);
      std::vector<std::string> others;
      for (int s = 1; s <= n; ++s) {
        if (s != current_->slot) {
          others.push_back(keys_.wake(r, s));
        }
      }
      client_->multi_set(others, std::vector<std::string>(others.size(), "left"));
    }
    if (client_->add(keys_.left(r), 1) >= n) {
      client_->set(keys_.all_left(r), "1");
    }
    // The store lives in this process: stay (up to close_timeout) until every node of the round
    // is done with it, so the others can still read the job's failures or finish their exit
    // barrier (torchrun #118891).
    // Lost nodes are counted as left by whoever declared them lost.
    if (endpoint_.hosted && close_rendezvous && n > 1) {
      client_->wait({keys_.all_left(r)}, millis(settings_.close_timeout_s));
    }
  } catch (const rendezvous::store::StoreError& error) {
    std::fprintf(stderr, "ddprun: leaving the %s: %s\n", where().c_str(), error.what());
  }
}

}  // namespace ddprun::agent::rdzv
