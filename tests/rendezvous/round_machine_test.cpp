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
//  - live recovery: a stop for a membership change is never also one for failed peers;
//  - hangs: a node is asked once per round for its stacks, and a hung worker is released only
//    after its node reported it (and, being otherwise stuck, its node still finishes); without
//    a crash or a signal every node answers, so no hang waits out peer_stacks_wait.
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

// A dynamic scenario as given; beyond two nodes the environment acts only at quiescence, which
// keeps the larger worlds' interleavings to explore in reach.
Scenario dynamic(Scenario scenario) {
  scenario.env_at_quiescence = scenario.env_at_quiescence || scenario.nodes > 2;
  return scenario;
}

}  // namespace

TEST_CASE("model: dynamic rounds form and finish without faults") {
  check(dynamic({.name = "2 of 2"}));
  check(dynamic({.name = "3 of 2:3", .nodes = 3, .max_nodes = 3}));
  check(dynamic({.name = "2 of 1:2, 2 workers each", .min_nodes = 1, .nproc = 2}));
}

TEST_CASE("model: a worker failure restarts once, then exhausts max_restarts") {
  check(dynamic({.name = "2 of 2, 1 failure, 1 restart", .max_restarts = 1, .failures = 1}));
  check(dynamic({.name = "2 of 2, 2 failures, 1 restart",
                 .max_restarts = 1,
                 .failures = 2,
                 .env_at_quiescence = true}));
  check(dynamic({.name = "3 of 3, 1 failure, 0 restarts",
                 .nodes = 3,
                 .min_nodes = 3,
                 .max_nodes = 3,
                 .max_restarts = 0,
                 .failures = 1,
                 .faulty = {1}}));
}

TEST_CASE("model: a crashed node is detected and the survivors re-form") {
  check(dynamic(
      {.name = "3 of 2:3, 1 crash", .nodes = 3, .max_nodes = 3, .max_restarts = 0, .crashes = 1}));
}

TEST_CASE("model: a broken collective re-forms the round before the heartbeats tell") {
  // Live recovery: the survivors' workers report the crashed peer's broken collectives.
  check(dynamic({.name = "2 of 1:2, 1 crash, broken collectives",
                 .min_nodes = 1,
                 .max_restarts = 0,
                 .crashes = 1,
                 .broken_collectives = true}));
  check(dynamic({.name = "3 of 2:3, node 2 crashes, broken collectives",
                 .nodes = 3,
                 .max_nodes = 3,
                 .max_restarts = 0,
                 .crashes = 1,
                 .broken_collectives = true,
                 .faulty = {2}}));
}

TEST_CASE("model: late nodes join a round that can grow, or wait as spares") {
  check(dynamic({.name = "2 of 1:2, node 1 late", .min_nodes = 1, .late = {1}}));
  check(dynamic({.name = "3 of 2:2, node 2 a spare, 1 crash",
                 .nodes = 3,
                 .late = {2},
                 .crashes = 1,
                 .faulty = {0}}));
}

TEST_CASE("model: a signalled node leaves and the others scale down or stop") {
  check(dynamic({.name = "2 of 2, SIGTERM", .signals = 1}));
  check(dynamic({.name = "3 of 2:3, SIGTERM", .nodes = 3, .max_nodes = 3, .signals = 1}));
  check(dynamic(
      {.name = "2 of 1:2, SIGTERM and a failure", .min_nodes = 1, .failures = 1, .signals = 1}));
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
  check(dynamic({.name = "4 of 4",
                 .nodes = 4,
                 .min_nodes = 4,
                 .max_nodes = 4,
                 .work = ddprun::common::Seconds(1)}));
}

// Larger worlds: minutes each. Run by hand: round_machine_test "[.large]".
TEST_CASE("model: larger worlds", "[.large]") {
  check(dynamic({.name = "4 of 2:4", .nodes = 4, .max_nodes = 4}));
  check(dynamic({.name = "4 of 3:4, 1 crash",
                 .nodes = 4,
                 .min_nodes = 3,
                 .max_nodes = 4,
                 .crashes = 1,
                 .faulty = {3},
                 .max_states = 20'000'000}));
  check(dynamic({.name = "3 of 2:3, SIGTERM and a failure",
                 .nodes = 3,
                 .max_nodes = 3,
                 .failures = 1,
                 .signals = 1,
                 .max_states = 20'000'000}));
}

TEST_CASE("model: static rounds restart together and close for late nodes") {
  check({.name = "static 2, 1 failure, 1 restart", .mode = RoundMode::kStatic, .failures = 1});
  check({.name = "static 3, SIGTERM",
         .mode = RoundMode::kStatic,
         .nodes = 3,
         .min_nodes = 3,
         .max_nodes = 3,
         .signals = 1});
  check({.name = "static 2, node 1 late", .mode = RoundMode::kStatic, .late = {1}});
}
