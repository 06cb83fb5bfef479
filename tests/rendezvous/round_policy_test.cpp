// The rendezvous decisions without sockets or clocks: join/close/last-call, heartbeat loss,
// failure and wake-up decisions, records, rank assignment, settings, store-host choice.

#include <catch2/catch.hpp>
#include <variant>

#include "rendezvous/backends/store_host.hpp"
#include "rendezvous/round/heartbeat_monitor.hpp"
#include "rendezvous/round/join_policy.hpp"
#include "rendezvous/round/machine_time.hpp"
#include "rendezvous/round/records.hpp"
#include "rendezvous/round/round_decisions.hpp"
#include "rendezvous/round/round_settings.hpp"

using namespace ddprun::rendezvous::round;
using namespace ddprun::rendezvous::backends;
using ddprun::common::Seconds;

namespace {

JoinPolicy policy(int min_nodes, int max_nodes, int expected = 0, Seconds last_call = Seconds(30)) {
  return JoinPolicy{min_nodes, max_nodes, expected, last_call};
}

template <typename T>
T as(const JoinAction& action) {
  REQUIRE(std::holds_alternative<T>(action));
  return std::get<T>(action);
}

NodeRecord node(std::string addr, int64_t pid, std::optional<int> hint = std::nullopt,
                int nproc = 2, int min_nodes = 1, int max_nodes = 4) {
  NodeRecord r;
  r.addr = std::move(addr);
  r.pid = pid;
  r.nonce = std::to_string(pid);
  r.nproc_per_node = nproc;
  r.rank_hint = hint;
  r.min_nodes = min_nodes;
  r.max_nodes = max_nodes;
  return r;
}

WorkerFailure failure(double unix_seconds, std::string host, int rank, int exit_code,
                      std::string message) {
  WorkerFailure f;
  f.timestamp = unix_time(unix_seconds);
  f.host = std::move(host);
  f.global_rank = rank;
  f.exit_code = exit_code;
  f.message = std::move(message);
  return f;
}

// Field by field, so that a key read into the wrong field shows as the two fields it touched.
void check_settings(const RdzvSettings& actual, const RdzvSettings& expected) {
  CHECK(actual.join_timeout == expected.join_timeout);
  CHECK(actual.last_call_timeout == expected.last_call_timeout);
  CHECK(actual.close_timeout == expected.close_timeout);
  CHECK(actual.keep_alive_interval == expected.keep_alive_interval);
  CHECK(actual.keep_alive_max_attempt == expected.keep_alive_max_attempt);
  CHECK(actual.heartbeat_timeout == expected.heartbeat_timeout);
  CHECK(actual.read_timeout == expected.read_timeout);
  CHECK(actual.is_host == expected.is_host);
}

}  // namespace

TEST_CASE("join: the slot that reaches MAX closes the round at once") {
  JoinStateMachine m(policy(2, 3), machine_time(600));
  const auto close = as<CloseRound>(m.on_joined(3, machine_time(1.0)));
  CHECK(close.participants == 3);
  CHECK(as<BecomeParticipant>(m.on_closed(3)).slot == 3);
}

TEST_CASE("join: below MIN waits for the join deadline, then times out") {
  JoinStateMachine m(policy(3, 3), machine_time(100));
  CHECK(as<AwaitClose>(m.on_joined(1, machine_time(0.0))).until == machine_time(100));
  // An early return of the wait is not a timeout.
  CHECK(as<AwaitClose>(m.on_wait_expired(machine_time(50))).until == machine_time(100));
  CHECK(as<JoinTimedOut>(m.on_wait_expired(machine_time(100))).min_nodes == 3);
}

TEST_CASE("join: the MIN-th node runs the last call, then closes with who joined") {
  JoinStateMachine m(policy(2, 4, 0, Seconds(30)), machine_time(600));
  CHECK(as<AwaitClose>(m.on_joined(2, machine_time(10.0))).until == machine_time(40));
  CHECK(as<AwaitClose>(m.on_wait_expired(machine_time(20))).until == machine_time(40));  // spurious
  as<ReadJoinedCount>(m.on_wait_expired(machine_time(40)));
  CHECK(as<CloseRound>(m.on_joined_count(3)).participants == 3);
  CHECK(as<BecomeParticipant>(m.on_closed(3)).participants == 3);
}

TEST_CASE("join: the last call never outlives the join deadline") {
  JoinStateMachine m(policy(1, 4, 0, Seconds(30)), machine_time(15));
  CHECK(as<AwaitClose>(m.on_joined(1, machine_time(10.0))).until == machine_time(15));
  as<ReadJoinedCount>(m.on_wait_expired(machine_time(15)));
  // More joiners than MAX by the time the counter is read: the round takes MAX.
  CHECK(as<CloseRound>(m.on_joined_count(9)).participants == 4);
}

TEST_CASE("join: an expected count (survivors + waiting) closes without a last call") {
  JoinStateMachine m(policy(1, 4, 2), machine_time(600));
  CHECK(m.close_target() == 2);
  CHECK(as<CloseRound>(m.on_joined(2, machine_time(0))).participants == 2);
  JoinStateMachine low(policy(2, 4, 1), machine_time(600));
  CHECK(low.close_target() == 2);  // never below MIN
  CHECK(std::holds_alternative<AwaitClose>(low.on_joined(1, machine_time(0))));
}

TEST_CASE("join: a slot past the closed count (or past MAX) is late") {
  JoinStateMachine over(policy(1, 2), machine_time(600));
  CHECK(as<AwaitClose>(over.on_joined(3, machine_time(0))).until == machine_time(600));
  CHECK(as<BecomeLate>(over.on_closed(2)).participants == 2);
  // The last call closed the round at 2 just before this node took slot 3.
  JoinStateMachine third(policy(2, 4, 0, Seconds(1)), machine_time(600));
  as<AwaitClose>(third.on_joined(3, machine_time(0)));
  CHECK(as<BecomeLate>(third.on_closed(2)).participants == 2);
}

TEST_CASE("heartbeat: a peer that stops is lost within interval x max_attempt") {
  const Seconds interval(5);
  HeartbeatMonitor m(interval, 3, machine_time(0));
  MachineTime t = machine_time(0);
  int64_t counter = 0;
  // Healthy: beats every interval (with some jitter); checks every check_period.
  for (; t < machine_time(100); t += m.check_period()) {
    if (static_cast<int64_t>(t.time_since_epoch() / (interval + Seconds(0.3))) > counter) {
      ++counter;
    }
    REQUIRE_FALSE(m.observe(counter, t));
  }
  // The peer dies just after its last beat: detected by death + 3 x interval.
  const MachineTime death = t;
  ++counter;
  REQUIRE_FALSE(m.observe(counter, t));
  MachineTime detected = machine_time(-1);
  for (t += m.check_period(); t < death + Seconds(60); t += m.check_period()) {
    if (m.observe(counter, t)) {
      detected = t;
      break;
    }
  }
  REQUIRE(detected > machine_time(0));
  CHECK(detected - death <= interval * 3 + Seconds(1e-9));
  CHECK(detected - death >= interval + m.check_period());
  CHECK(m.observe(counter + 5, detected + Seconds(1)));  // lost stays lost
}

TEST_CASE("heartbeat: never declared lost while the counter moves, even slowly at max_attempt 1") {
  HeartbeatMonitor m(Seconds(1.0), 1, machine_time(0));
  int64_t counter = 0;
  for (MachineTime t = machine_time(0); t < machine_time(50); t += m.check_period()) {
    if (static_cast<int64_t>(t.time_since_epoch() / Seconds(1.2)) > counter) {
      counter = static_cast<int64_t>(t.time_since_epoch() / Seconds(1.2));
    }
    REQUIRE_FALSE(m.observe(counter, t));
  }
}

TEST_CASE("failure decisions count restarts job-wide") {
  CHECK(decide_failure(1, 0) == FailureDecision::kExhausted);
  CHECK(decide_failure(1, 1) == FailureDecision::kRestart);
  CHECK(decide_failure(3, 2) == FailureDecision::kExhausted);
  CHECK(parse_failure_decision(to_string(FailureDecision::kRestart)) == FailureDecision::kRestart);
  CHECK(parse_failure_decision(to_string(FailureDecision::kExhausted)) ==
        FailureDecision::kExhausted);
  CHECK_FALSE(parse_failure_decision("bogus"));
}

TEST_CASE("round signals: failure first, then loss, then waiting nodes that fit") {
  WakeObservation o;
  o.participants = 2;
  o.max_nodes = 3;
  CHECK(decide_round_signal(o) == RoundSignal::kNone);
  o.waiting_nodes = 1;
  CHECK(decide_round_signal(o) == RoundSignal::kMembershipChange);
  o.participants = 3;  // full: waiting nodes are spares
  CHECK(decide_round_signal(o) == RoundSignal::kNone);
  o.lost_nodes = 1;
  CHECK(decide_round_signal(o) == RoundSignal::kMembershipChange);
  o.failure = FailureDecision::kRestart;
  CHECK(decide_round_signal(o) == RoundSignal::kRestartRequested);
  o.failure = FailureDecision::kExhausted;
  CHECK(decide_round_signal(o) == RoundSignal::kJobFailed);
}

TEST_CASE("next round's expected nodes: survivors plus waiting, within 1..MAX") {
  CHECK(next_round_expected_nodes(3, 1, 0, 3) == 2);
  CHECK(next_round_expected_nodes(2, 0, 1, 3) == 3);
  CHECK(next_round_expected_nodes(3, 0, 5, 3) == 3);
  CHECK(next_round_expected_nodes(2, 2, 0, 3) == 1);
  CHECK(next_round_expected_nodes(2, 99, 0, 3) == 1);
}

TEST_CASE("records round-trip and reject bad input with the key named") {
  const std::string key = "ddprun/rdzv/j/r0/node/5";
  auto r = node("10.0.0.7", 42, 3, 8, 2, 4);
  auto back = decode_node_record(encode_node_record(r), key);
  CHECK(back.addr == r.addr);
  CHECK(back.pid == 42);
  CHECK(back.nonce == r.nonce);
  CHECK(back.nproc_per_node == 8);
  CHECK(back.rank_hint == 3);
  CHECK(back.min_nodes == 2);
  CHECK(back.max_nodes == 4);
  CHECK_FALSE(decode_node_record(encode_node_record(node("a", 1)), key).rank_hint);
  CHECK_THROWS_WITH(decode_node_record("not json", key),
                    Catch::Contains("the key '" + key + "' is corrupt"));
  CHECK_THROWS_WITH(
      decode_node_record(R"({"addr":"a","nonce":"x","pid":1,"nproc":0,"min":1,"max":1})", key),
      Catch::Contains("nproc"));
  CHECK_THROWS_WITH(
      decode_node_record(R"({"addr":"a","nonce":"x","pid":1,"nproc":1,"min":1})", key),
      Catch::Contains("max"));
  CHECK_THROWS_WITH(decode_node_record("error agents disagree", key),
                    Catch::Equals("agents disagree"));
}

TEST_CASE("ranks: hint first, then address, then pid; heterogeneous nproc") {
  // Slots in join order: c, a (hint 0), b, a again with a higher pid.
  std::vector<NodeRecord> records = {node("c", 1, std::nullopt, 1), node("z", 9, 0, 4),
                                     node("b", 5, std::nullopt, 2), node("b", 3, std::nullopt, 2)};
  auto a = assign_dynamic_ranks(records, 7);
  REQUIRE(a.size() == 4);
  CHECK(a[1].group_rank == 0);  // hint 0
  CHECK(a[3].group_rank == 1);  // b, pid 3
  CHECK(a[2].group_rank == 2);  // b, pid 5
  CHECK(a[0].group_rank == 3);  // c
  CHECK(a[1].base_global_rank == 0);
  CHECK(a[3].base_global_rank == 4);
  CHECK(a[2].base_global_rank == 6);
  CHECK(a[0].base_global_rank == 8);
  for (const auto& x : a) {
    CHECK(x.world_size == 9);
    CHECK(x.group_world_size == 4);
    CHECK(x.restart_count == 7);
    CHECK(x.rank0_slot == 2);
  }
  // The ring: rank r watches rank r + 1.
  CHECK(a[1].neighbor_slot == 4);
  CHECK(a[0].neighbor_slot == 2);
  // The same membership in another join order gives the same ranks.
  std::vector<NodeRecord> shuffled = {records[3], records[0], records[1], records[2]};
  auto b = assign_dynamic_ranks(shuffled, 0);
  CHECK(b[0].group_rank == 1);
  CHECK(b[1].group_rank == 3);
  CHECK(b[2].group_rank == 0);
  CHECK(b[3].group_rank == 2);
}

TEST_CASE("ranks: disagreeing --nnodes names both values") {
  std::vector<NodeRecord> records = {node("a", 1, std::nullopt, 1, 2, 2),
                                     node("b", 2, std::nullopt, 1, 3, 3)};
  CHECK_THROWS_WITH(assign_dynamic_ranks(records, 0),
                    Catch::Contains("--nnodes 2") && Catch::Contains("--nnodes 3"));
  std::vector<NodeRecord> elastic = {node("a", 1, std::nullopt, 1, 1, 2),
                                     node("b", 2, std::nullopt, 1, 1, 3)};
  CHECK_THROWS_WITH(assign_dynamic_ranks(elastic, 0),
                    Catch::Contains("1:2") && Catch::Contains("1:3"));
}

TEST_CASE("static ranks follow --node_rank") {
  std::vector<NodeRecord> records = {node("b", 1, 0), node("a", 2, 1)};
  auto a = assign_static_ranks(records, 0);
  CHECK(a[0].group_rank == 0);
  CHECK(a[1].group_rank == 1);
  CHECK(a[1].base_global_rank == 2);
  records[1].rank_hint = 0;
  CHECK_THROWS(assign_static_ranks(records, 0));
}

TEST_CASE("assignments round-trip; published errors and garbage raise") {
  Assignment a{2, 3, 4, 6, 1, 1, 2};
  auto back = decode_assignment(encode_assignment(a), "k");
  CHECK(back.group_rank == 2);
  CHECK(back.group_world_size == 3);
  CHECK(back.base_global_rank == 4);
  CHECK(back.world_size == 6);
  CHECK(back.restart_count == 1);
  CHECK(back.neighbor_slot == 1);
  CHECK(back.rank0_slot == 2);
  CHECK_THROWS_WITH(decode_assignment(encode_assignment_error("boom"), "k"), Catch::Equals("boom"));
  CHECK_THROWS(decode_assignment("ok 1 2", "k"));
  CHECK_THROWS(decode_assignment("ok 5 2 0 2 0 1 1", "k"));  // rank beyond world
  CHECK_THROWS(decode_assignment("ok -1 2 0 2 0 1 1", "k"));
  CHECK_THROWS(decode_assignment("ok 0 2 0 2 0 1 1 9", "k"));
  CHECK_THROWS(decode_assignment("garbage", "k"));
}

TEST_CASE("failure lines: root cause first, malformed lines skipped, count bounded") {
  const WorkerFailure late = failure(20, "b", 3, -15, "Signal 15 (SIGTERM)");
  const WorkerFailure early = failure(10, "a", 0, 1, std::string("bad \xff utf8"));
  const std::string text =
      encode_failure_line(late) + "{not json\n" + encode_failure_line(early) + "\n";
  auto failures = decode_failure_lines(text);
  REQUIRE(failures.size() == 2);
  CHECK(failures[0].host == "a");
  CHECK(failures[0].exit_code == 1);
  CHECK(failures[1].host == "b");
  CHECK(failures[1].exit_code == -15);
  CHECK(decode_failure_lines(text, 1).size() == 1);
}

TEST_CASE("failures seen while being stopped for others' follow the job's root cause") {
  WorkerFailure stopped = failure(5, "c", 4, 3, "seen while stopped");
  stopped.while_stopped = true;
  const WorkerFailure published = failure(10, "a", 0, 3, "published");
  // Earlier by its clock, it still comes after the failure the round acted on, both ways round.
  auto failures =
      decode_failure_lines(encode_failure_line(stopped) + encode_failure_line(published));
  REQUIRE(failures.size() == 2);
  CHECK(failures[0].host == "a");
  CHECK_FALSE(failures[0].while_stopped);
  CHECK(failures[1].host == "c");
  CHECK(failures[1].while_stopped);
  // A flag of another type makes the line malformed: skipped.
  CHECK(decode_failure_lines(R"({"timestamp":1,"host":"x","rank":0,"local_rank":0,"exitcode":1,)"
                             R"("pid":1,"error_file":"","message":"","while_stopped":"yes"})")
            .empty());
  // Merging this node's own into what was read: each worker once, the same order.
  const auto merged = merge_failures({published}, {stopped, published});
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].host == "a");
  CHECK(merged[1].host == "c");
  CHECK(merge_failures({}, {stopped}).front().host == "c");  // alone, it leads
}

TEST_CASE("settings: torchrun's defaults, every key, bad values named") {
  SECTION("torchrun's defaults") {
    check_settings(parse_rdzv_settings({}), {.join_timeout = Seconds(600),
                                             .last_call_timeout = Seconds(30),
                                             .close_timeout = Seconds(30),
                                             .keep_alive_interval = Seconds(5),
                                             .keep_alive_max_attempt = 3,
                                             .heartbeat_timeout = Seconds(5),
                                             .read_timeout = Seconds(60),
                                             .is_host = std::nullopt});
  }
  SECTION("every key, unknown ones ignored") {
    check_settings(
        parse_rdzv_settings({{"join_timeout", "7"},
                             {"last_call_timeout", "0"},
                             {"close_timeout", "2.5"},
                             {"keep_alive_interval", "0.2"},
                             {"keep_alive_max_attempt", "4"},
                             {"heartbeat_timeout", "1"},
                             {"read_timeout", "9"},
                             {"is_host", "yes"},
                             {"unknown_key", "whatever"}}),
        // The values above in RdzvSettings' field order, which the keys follow.
        {Seconds(7), Seconds(0), Seconds(2.5), Seconds(0.2), 4, Seconds(1), Seconds(9), true});
    CHECK(parse_rdzv_settings({{"is_host", "0"}}).is_host == false);
  }
  SECTION("bad values named") {
    CHECK_THROWS_WITH(parse_rdzv_settings({{"join_timeout", "-1"}}),
                      Catch::Contains("join_timeout"));
    CHECK_THROWS_WITH(parse_rdzv_settings({{"join_timeout", "0"}}),
                      Catch::Contains("join_timeout"));
    CHECK_THROWS_WITH(parse_rdzv_settings({{"keep_alive_max_attempt", "1.5"}}),
                      Catch::Contains("keep_alive_max_attempt"));
    CHECK_THROWS_WITH(parse_rdzv_settings({{"is_host", "maybe"}}), Catch::Contains("is_host"));
  }
}

TEST_CASE("store host: is_host wins, then --local_addr, then the machine's names") {
  using enum StoreHosting;
  LocalIdentity me{{"node1", "node1.cluster"}, {"10.1.2.3", "127.0.0.1"}};
  HostQuestion q;
  q.endpoint_host = "node1.cluster";
  CHECK(store_hosting(q, me) == if_free);
  q.endpoint_host = "node2";
  q.endpoint_addresses = {"10.1.2.4"};
  CHECK(store_hosting(q, me) == client);
  q.endpoint_addresses = {"10.1.2.3"};  // resolves to one of our interfaces
  CHECK(store_hosting(q, me) == if_free);
  q.endpoint_host = "localhost";
  CHECK(store_hosting(q, me) == if_free);
  q.forced = false;
  CHECK(store_hosting(q, me) == client);
  q.forced = true;
  q.endpoint_host = "elsewhere";
  q.endpoint_addresses = {"192.0.2.1"};
  CHECK(store_hosting(q, me) == required);

  // Agents on 127.0.0.2 and 127.0.0.3 of one machine, endpoint on 127.0.0.2.
  HostQuestion local;
  local.endpoint_host = "127.0.0.2";
  local.endpoint_addresses = {"127.0.0.2"};
  local.local_addr = "127.0.0.2";
  local.local_addr_addresses = {"127.0.0.2"};
  // The endpoint is this agent's own address: nobody else may hold it.
  CHECK(store_hosting(local, me) == required);
  // Another agent of the machine may host a loopback endpoint too: the bind decides.
  local.local_addr = "127.0.0.3";
  local.local_addr_addresses = {"127.0.0.3"};
  CHECK(store_hosting(local, me) == if_free);
  local.local_addr = "node1";  // a name resolving to the endpoint's address
  local.local_addr_addresses = {"127.0.0.2"};
  CHECK(store_hosting(local, me) == required);
  // An endpoint on another machine is never hosted here, whatever --local_addr says.
  local.endpoint_host = "node2";
  local.endpoint_addresses = {"10.1.2.4"};
  CHECK(store_hosting(local, me) == client);
}

TEST_CASE("a taken port: who listens on it, and whether a should-host agent joins") {
  // /proc/net/tcp's layout: a header, then sl, local, remote, state, queues, timer, retransmits,
  // uid, timeout, inode. 0x7160 = 29024; state 0A listens, 01 is established.
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0200007F:7160 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        "
      "0 4242 1 0000000000000000 100 0 0 10 0\n"
      "   1: 0100007F:7160 0300007F:9C40 01 00000000:00000000 00:00000000 00000000  2000        "
      "0 4243 1 0000000000000000 20 4 30 10 -1\n"
      "   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
      "0 4244 1 0000000000000000 100 0 0 10 0\n"
      "   0: 00000000000000000000000000000000:7160 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000  3000        0 4245 1 0000000000000000 100 0 0 10 "
      "0\n"
      "garbage line\n";
  CHECK(listening_uids(table, 29024) == std::vector<unsigned>{1000, 3000});
  CHECK(listening_uids(table, 8080) == std::vector<unsigned>{0});
  CHECK(listening_uids(table, 1).empty());
  CHECK(listening_uids("", 29024).empty());

  for (const bool time_left : {true, false}) {
    CHECK(taken_port_action(false, {1000}, 1000, time_left) == TakenPort::join);
    CHECK(taken_port_action(false, {1000, 1000}, 1000, time_left) == TakenPort::join);
    CHECK(taken_port_action(false, {1000, 3000}, 1000, time_left) == TakenPort::refuse);
    CHECK(taken_port_action(false, {3000}, 1000, time_left) == TakenPort::refuse);
    CHECK(taken_port_action(true, {1000}, 1000, time_left) == TakenPort::refuse);  // is_host=1
    CHECK(taken_port_action(true, {}, 1000, time_left) == TakenPort::refuse);
  }
  // No listener yet: the winner of the bind may not listen yet; look again while time is left,
  // then refuse (not seen: not known to be ours).
  CHECK(taken_port_action(false, {}, 1000, true) == TakenPort::look_again);
  CHECK(taken_port_action(false, {}, 1000, false) == TakenPort::refuse);
}

TEST_CASE("store bind address: exact for numeric loopback, every interface otherwise") {
  CHECK(store_bind_address("127.0.0.3") == "127.0.0.3");
  CHECK(store_bind_address("node1") == "0.0.0.0");
  CHECK(store_bind_address("10.0.0.1") == "0.0.0.0");
  CHECK(is_loopback_address("127.5.5.5"));
  CHECK(is_loopback_address("::1"));
  CHECK_FALSE(is_loopback_address("10.0.0.1"));
}
