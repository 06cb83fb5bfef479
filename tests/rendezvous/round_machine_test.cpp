// The round machine explored exhaustively: for each scenario, every interleaving of the nodes'
// store operations, timers, worker outcomes and injected faults, against a simulated store.
// Invariants checked in every reached state:
//  - one assignment per round: every node that starts round r agrees on its world, and the
//    group ranks are distinct, inside the world and dense (a permutation as the round fills);
//  - single writers: a round's close, assignments, workers' store and failure decision are
//    written once (claims are compare-and-set), so a stale node never alters a decided round;
//  - restarts counted once: the job-wide counter lies between the rounds that published a
//    decision and the rounds whose failure was claimed, and no round runs past --max-restarts;
//  - workers: never started twice in a round, never while others run, never left running;
//  - hangs: a node is asked once per round for its stacks, and a hung worker is released only
//    after its node reported it (and, being otherwise stuck, its node still finishes); without
//    a crash or a signal every node answers, so no hang waits out peer_stacks_wait_s.
// And in every final state: every node that did not crash finished (nobody hangs), with 0, 1 or
// 128+15, and with 0 when no fault was injected.

#include <catch2/catch.hpp>

#include "round_model.hpp"

using namespace ddprun::rendezvous::round;
using namespace ddprun::rendezvous::round::model;

namespace {

void check(const Scenario& scenario) {
  const ExploreResult result = explore(scenario);
  INFO(result.failure);
  CHECK(result.failure.empty());
  CHECK(result.terminals > 0);
  WARN(scenario.name << ": " << result.states << " states, " << result.terminals << " final");
}

Scenario dynamic(std::string name, int nodes, int min_nodes, int max_nodes) {
  Scenario s;
  s.name = std::move(name);
  s.nodes = nodes;
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  s.env_at_quiescence = nodes > 2;
  return s;
}

}  // namespace

TEST_CASE("model: dynamic rounds form and finish without faults") {
  check(dynamic("2 of 2", 2, 2, 2));
  check(dynamic("3 of 2:3", 3, 2, 3));
  Scenario two_procs = dynamic("2 of 1:2, 2 workers each", 2, 1, 2);
  two_procs.nproc = 2;
  check(two_procs);
}

TEST_CASE("model: a worker failure restarts once, then exhausts max_restarts") {
  Scenario restart = dynamic("2 of 2, 1 failure, 1 restart", 2, 2, 2);
  restart.failures = 1;
  restart.max_restarts = 1;
  check(restart);
  Scenario exhausted = dynamic("2 of 2, 2 failures, 1 restart", 2, 2, 2);
  exhausted.failures = 2;
  exhausted.max_restarts = 1;
  exhausted.env_at_quiescence = true;
  check(exhausted);
  Scenario none = dynamic("3 of 3, 1 failure, 0 restarts", 3, 3, 3);
  none.failures = 1;
  none.max_restarts = 0;
  none.faulty = {1};
  check(none);
}

TEST_CASE("model: a crashed node is detected and the survivors re-form") {
  Scenario crash = dynamic("3 of 2:3, 1 crash", 3, 2, 3);
  crash.crashes = 1;
  crash.max_restarts = 0;
  check(crash);
}

TEST_CASE("model: late nodes join a round that can grow, or wait as spares") {
  Scenario late = dynamic("2 of 1:2, node 1 late", 2, 1, 2);
  late.late = {1};
  check(late);
  Scenario spare = dynamic("3 of 2:2, node 2 a spare, 1 crash", 3, 2, 2);
  spare.late = {2};
  spare.crashes = 1;
  spare.faulty = {0};
  check(spare);
}

TEST_CASE("model: a signalled node leaves and the others scale down or stop") {
  Scenario signal = dynamic("2 of 2, SIGTERM", 2, 2, 2);
  signal.signals = 1;
  check(signal);
  Scenario three = dynamic("3 of 2:3, SIGTERM", 3, 2, 3);
  three.signals = 1;
  check(three);
  Scenario mixed = dynamic("2 of 1:2, SIGTERM and a failure", 2, 1, 2);
  mixed.signals = 1;
  mixed.failures = 1;
  check(mixed);
}

TEST_CASE("model: a hung worker waits for the other nodes' stacks, then fails and restarts") {
  check({.name = "2 of 2, 1 hang", .hangs = 1});
  check({.name = "2 of 2, 2 hangs, 1 restart", .hangs = 2, .env_at_quiescence = true});
  check({.name = "2 of 1:2, 1 hang, 1 crash",
         .min_nodes = 1,
         .crashes = 1,
         .hangs = 1,
         .env_at_quiescence = true});
  check({.name = "2 of 2, 1 hang, SIGTERM", .signals = 1, .hangs = 1, .env_at_quiescence = true});
  check({.name = "static 2, 1 hang", .mode = RoundMode::kStatic, .hangs = 1});
}

TEST_CASE("model: four nodes") {
  Scenario full = dynamic("4 of 4", 4, 4, 4);
  full.work_s = 1;
  check(full);
}

// Larger worlds: minutes each. Run by hand: round_machine_test "[.large]".
TEST_CASE("model: larger worlds", "[.large]") {
  check(dynamic("4 of 2:4", 4, 2, 4));
  Scenario crash = dynamic("4 of 3:4, 1 crash", 4, 3, 4);
  crash.crashes = 1;
  crash.faulty = {3};
  crash.max_states = 20'000'000;
  check(crash);
  Scenario mixed = dynamic("3 of 2:3, SIGTERM and a failure", 3, 2, 3);
  mixed.signals = 1;
  mixed.failures = 1;
  mixed.max_states = 20'000'000;
  check(mixed);
}

TEST_CASE("model: static rounds restart together and close for late nodes") {
  Scenario s;
  s.name = "static 2, 1 failure, 1 restart";
  s.mode = RoundMode::kStatic;
  s.nodes = 2;
  s.min_nodes = 2;
  s.max_nodes = 2;
  s.failures = 1;
  s.max_restarts = 1;
  check(s);
  s.name = "static 3, SIGTERM";
  s.nodes = 3;
  s.min_nodes = 3;
  s.max_nodes = 3;
  s.failures = 0;
  s.signals = 1;
  check(s);
  s.name = "static 2, node 1 late";
  s.nodes = 2;
  s.min_nodes = 2;
  s.max_nodes = 2;
  s.signals = 0;
  s.late = {1};
  check(s);
}
