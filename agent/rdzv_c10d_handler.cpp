#include "agent/rdzv_c10d_handler.hpp"

#include <algorithm>
#include <charconv>
#include <variant>

#include "agent/rdzv_state_machine.hpp"

namespace ddprun::agent::rdzv {
namespace {

uint64_t parse_round(const std::string& text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size()) {
    throw RendezvousError("malformed round number in the store: '" + text.substr(0, 64) + "'");
  }
  return value;
}

int parse_small_count(const std::string& text, const char* what) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || value < 0 || value > (1 << 20)) {
    throw RendezvousError(std::string("malformed ") + what + " in the store");
  }
  return value;
}

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

}  // namespace

C10dRendezvous::C10dRendezvous(const launcher::LaunchConfig& config, RdzvSettings settings,
                               StoreEndpoint endpoint, std::string run_id, std::string local_addr)
    : StoreRendezvous(config, settings, std::move(endpoint), std::move(run_id),
                      std::move(local_addr)) {}

void C10dRendezvous::check_config() {
  if (config_checked_) {
    return;
  }
  const std::string mine = nnodes_text(config().min_nodes, config().max_nodes);
  const std::string first = store().compare_set(keys().config(), "", mine);
  if (first != mine) {
    const std::string message = "agents disagree on --nnodes: " + self().addr + " (pid " +
                                std::to_string(self().pid) + ") has --nnodes " + mine +
                                " but the " + where() + " was started with --nnodes " +
                                first.substr(0, 64);
    // Fail the round now forming too, so nobody waits for a node that will never come.
    const std::string r = store().compare_set(keys().round(), "", "0");
    const uint64_t round = parse_round(r);
    if (store().compare_set(keys().close_claim(round), "", self().nonce) == self().nonce) {
      store().set(keys().closed(round), "error " + message);
    }
    throw RendezvousError(message);
  }
  config_checked_ = true;
}

void C10dRendezvous::publish_assignments(uint64_t round, int participants) {
  const auto record_keys =
      keys().for_slots(participants, [&](int s) { return keys().node(round, s); });
  const auto assign_keys =
      keys().for_slots(participants, [&](int s) { return keys().assignment(round, s); });
  std::vector<std::string> values;
  try {
    if (!store().wait(record_keys, millis(settings().close_timeout_s))) {
      throw RendezvousError(where() + ": a node took a slot in round " + std::to_string(round) +
                            " but did not publish its record within close_timeout");
    }
    const auto texts = store().multi_get(record_keys);
    std::vector<NodeRecord> records;
    records.reserve(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      records.push_back(decode_node_record(texts[i], static_cast<int>(i) + 1));
    }
    const int restarts = static_cast<int>(store().add(keys().restarts(), 0));
    for (const auto& a : assign_dynamic_ranks(records, restarts)) {
      values.push_back(encode_assignment(a));
    }
  } catch (const RendezvousError& error) {
    // Every participant raises the same error instead of waiting for an assignment.
    values.assign(assign_keys.size(), encode_assignment_error(error.what()));
  }
  store().multi_set(assign_keys, values);
}

std::pair<std::string, uint16_t> C10dRendezvous::workers_store(const FormedRound& round) {
  const uint64_t r = round.round;
  if (round.assignment.group_rank == 0) {
    workers_store_.reset();
    rendezvous::store::StoreServerOptions options;
    options.host = "0.0.0.0";
    options.port = 0;
    try {
      workers_store_ = rendezvous::store::StoreServer::start(options);
    } catch (const std::exception& error) {
      throw RendezvousError(std::string("cannot start the workers' store: ") + error.what());
    }
    const uint16_t port = workers_store_->port();
    store().set(keys().master(r), self().addr + " " + std::to_string(port));
    return {self().addr, port};
  }
  workers_store_.reset();
  const std::string text = store().get(keys().master(r), millis(settings().close_timeout_s));
  const auto space = text.rfind(' ');
  if (space == std::string::npos || space == 0 || text.size() > 2048) {
    throw RendezvousError("malformed workers' store address in the store");
  }
  const int port = parse_small_count(text.substr(space + 1), "workers' store port");
  if (port < 1 || port > 65535) {
    throw RendezvousError("malformed workers' store port in the store");
  }
  return {text.substr(0, space), static_cast<uint16_t>(port)};
}

void C10dRendezvous::close_later_rounds(uint64_t round, const std::string& error) {
  const uint64_t newest =
      std::max(round + 1, parse_round(store().compare_set(keys().round(), "", "0")));
  // Claiming the close is exclusive: a later round that already formed is left alone.
  for (uint64_t later = round + 1; later <= newest && later <= round + 2; ++later) {
    if (store().compare_set(keys().close_claim(later), "", self().nonce) == self().nonce) {
      store().set(keys().closed(later), error);
    }
  }
}

FormedRound C10dRendezvous::join(const std::optional<FormedRound>& previous) {
  check_config();
  const double deadline = now_s() + settings().join_timeout_s;
  const int max_nodes = config().max_nodes;

  uint64_t round = 0;
  int expected = 0;
  if (previous) {
    const uint64_t p = previous->round;
    expected = next_round_expected_nodes(previous->assignment.group_world_size,
                                         store().add(keys().lost(p), 0),
                                         store().add(keys().waiting(p), 0), max_nodes);
    round =
        parse_round(store().compare_set(keys().round(), std::to_string(p), std::to_string(p + 1)));
    if (round <= p) {
      round = p + 1;  // the key was behind (it only ever moves forward for live rounds)
    }
  } else {
    round = parse_round(store().compare_set(keys().round(), "", "0"));
  }

  for (;;) {
    if (store().check({keys().job_closed()})) {
      throw RendezvousError(where() + " is closed: the job has ended");
    }
    if (expected > 0) {
      expected = parse_small_count(
          store().compare_set(keys().expected(round), "", std::to_string(expected)),
          "expected node count");
    }
    const int slot = static_cast<int>(store().add(keys().joined(round), 1));
    store().set(keys().node(round, slot), encode_node_record(self()));
    if (expected == 0 && store().check({keys().expected(round)})) {
      expected = parse_small_count(store().get(keys().expected(round)), "expected node count");
    }

    JoinPolicy policy{config().min_nodes, max_nodes, expected, settings().last_call_timeout_s};
    JoinStateMachine machine(policy, deadline);
    JoinAction action = machine.on_joined(slot, now_s());
    bool closed_by_me = false;
    std::optional<FormedRound> formed;
    std::optional<int> late_count;
    while (!formed && !late_count) {
      std::visit(
          Overloaded{
              [&](const AwaitClose& a) {
                const auto closed_key = keys().closed(round);
                if (store().wait({closed_key}, millis(a.until_s - now_s()))) {
                  const std::string text = store().get(closed_key);
                  if (text.starts_with("error ")) {
                    throw RendezvousError(text.substr(6));
                  }
                  const int participants = parse_small_count(text, "participant count");
                  if (participants < 1 || participants > max_nodes) {
                    throw RendezvousError(where() + ": round " + std::to_string(round) +
                                          " closed with " + std::to_string(participants) +
                                          " nodes, outside --nnodes " +
                                          nnodes_text(config().min_nodes, max_nodes));
                  }
                  action = machine.on_closed(participants);
                } else {
                  action = machine.on_wait_expired(now_s());
                }
              },
              [&](const CloseRound& c) {
                // Claim with compare_set (exclusive), publish with set: some servers do not
                // wake waiters on compare_set.
                if (store().compare_set(keys().close_claim(round), "", self().nonce) ==
                    self().nonce) {
                  closed_by_me = true;
                  store().set(keys().closed(round), std::to_string(c.participants));
                }
                action = AwaitClose{deadline};
              },
              [&](const ReadJoinedCount&) {
                action =
                    machine.on_joined_count(static_cast<int>(store().add(keys().joined(round), 0)));
              },
              [&](const BecomeParticipant& p) {
                if (closed_by_me) {
                  publish_assignments(round, p.participants);
                }
                FormedRound f;
                f.round = round;
                f.slot = slot;
                f.assignment = decode_assignment(store().get(keys().assignment(round, slot),
                                                             millis(settings().close_timeout_s)));
                formed = f;
              },
              [&](const BecomeLate& l) { late_count = l.participants; },
              [&](const JoinTimedOut& t) {
                throw RendezvousError(
                    where() + ": timed out after " + seconds_text(settings().join_timeout_s) +
                    " s (join_timeout) waiting for " + std::to_string(t.min_nodes) +
                    " nodes to join round " + std::to_string(round) + " (" +
                    std::to_string(store().add(keys().joined(round), 0)) + " joined)");
              },
          },
          action);
    }
    if (formed) {
      auto [addr, port] = workers_store(*formed);
      formed->master_addr = addr;
      formed->master_port = port;
      return *formed;
    }

    // The round closed without us: register as waiting, wake it if it can grow, then wait for
    // its participants to leave it and try the next one.
    const int participants = *late_count;
    store().add(keys().waiting(round), 1);
    if (waiting_node_wakes_round(participants, max_nodes)) {
      const auto wake_keys =
          keys().for_slots(participants, [&](int s) { return keys().wake(round, s); });
      store().multi_set(wake_keys, std::vector<std::string>(wake_keys.size(), "waiting"));
    }
    if (!store().wait({keys().reform(round)}, millis(deadline - now_s()))) {
      throw RendezvousError(
          where() + ": timed out after " + seconds_text(settings().join_timeout_s) +
          " s (join_timeout) waiting as a spare for round " + std::to_string(round) + " to end");
    }
    const uint64_t next = parse_round(
        store().compare_set(keys().round(), std::to_string(round), std::to_string(round + 1)));
    round = std::max(next, round + 1);
    expected = 0;
  }
}

}  // namespace ddprun::agent::rdzv
