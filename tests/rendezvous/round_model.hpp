#pragma once
// A model of several nodes' round machines against one simulated store, for exhaustive
// exploration: every interleaving of the nodes' store ops, timer firings, worker events and
// injected faults (crashes, worker failures, signals, late joins), with the time advancing only
// when nothing else can happen (ops are fast next to timeouts). Worlds are values: the explorer
// copies one per branch and merges worlds with equal digests.
//
// The store has TCPStore semantics (kv_ops.hpp). Each node's non-wait ops run in the order it
// issued them, one at a time, atomically; each wait completes on its own once its keys exist or
// its timeout passes. A crashed node's queued ops are lost (an op that already ran stays run).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "common/seconds.hpp"
#include "rendezvous/round/machine_time.hpp"
#include "rendezvous/round/round_machine.hpp"

namespace ddprun::rendezvous::round::model {

struct Scenario {
  std::string name;
  RoundMode mode = RoundMode::kDynamic;
  int nodes = 2;
  int min_nodes = 2;
  int max_nodes = 2;
  int nproc = 1;
  int max_restarts = 1;
  std::set<int> late{};  // nodes that start only when the explorer chooses (any time)
  int crashes = 0;       // fault budgets, over the whole run
  int failures = 0;
  int signals = 0;
  // Workers that hang: the node's watchdog reports it (HangDetected), the others capture their
  // stacks, and the hung worker is killed (a failure) once the round released it.
  int hangs = 0;
  // Live recovery: once a node crashed, each running group may report its broken collectives
  // (CollectiveBroke), at any moment, once.
  bool broken_collectives = false;
  // Nodes allowed to crash / fail / be signalled (empty: any).
  std::set<int> faulty{};
  // How far the clock may run from the start of the run (time 0).
  common::Seconds horizon{300};
  // Workers end (succeed or fail) within this long of their start, and late nodes start by
  // late_by: the clock does not pass these points before the environment acts, which keeps
  // the explored time short without losing an ordering of events.
  common::Seconds work{2};
  common::Seconds late_by{12};
  // Environment events (worker outcomes, faults, late starts) only when no store op or due
  // timer is pending, instead of between any two ops: for the larger worlds.
  bool env_at_quiescence = false;
  std::size_t max_states = 3'000'000;
};

struct WaitOp {
  uint64_t id = 0;
  std::vector<std::string> keys;
  MachineTime deadline{};
};

struct SimNode {
  std::optional<RoundMachine> machine;
  bool started = false;
  bool crashed = false;
  bool broke_reported = false;  // its workers reported a collective broken by a crashed peer
  std::vector<IssueKv> queue;   // non-wait ops, in issue order
  std::vector<WaitOp> waits;
  enum class Workers { kNone, kRunning, kStopping } workers = Workers::kNone;
  std::optional<RoundInfo> running;  // the round whose workers run
  MachineTime running_since{};
  std::optional<Finish> finish;
  std::set<uint64_t> rounds_started;
  bool hosting_requested = false;
  bool hung = false;              // its workers hang: they neither succeed nor fail by themselves
  bool release_owed = false;      // HangDetected sent, PeersCapturedStacks not yet received
  bool released = false;          // the hung worker may be killed
  bool capture_owed = false;      // CaptureStacks received, StacksCaptured not yet sent
  bool own_capture_owed = false;  // HangDetected sent: its own capture's StacksCaptured
};

// What a run did, checked by the invariants.
struct RoundRecord {
  int group_world_size = 0;
  int world_size = 0;
  int restart_count = -1;
  std::map<int, int> node_of_group_rank;
  std::map<int, int> base_of_group_rank;
};

class World {
 public:
  explicit World(const Scenario& scenario);

  // Every action possible now; each returns a new world when applied.
  std::vector<std::function<void(World&)>> actions() const;
  // "" when every invariant holds, else what broke.
  std::string violated() const;
  // At a state with no action left: "" when every live node finished as it should.
  std::string terminal_problem() const;
  uint64_t digest() const;
  std::string trace() const;

  const Scenario& scenario() const { return *scenario_; }

 private:
  void absorb(int node);  // carries out the node's effects
  void deliver(int node, const MachineEvent& event);
  KvResult execute(const KvOp& op);
  bool keys_exist(const std::vector<std::string>& keys) const;
  std::optional<MachineTime> next_time() const;

  const Scenario* scenario_;
  // The model's clock starts far from the steady clock's epoch, as a real one does, so that a
  // time the machine makes up (a zero) shows as long past instead of as a plausible deadline.
  static constexpr MachineTime kModelStart = machine_time(1e6);
  MachineTime now_{kModelStart};
  std::map<std::string, std::string> store_;
  std::map<std::string, int> writes_;  // per key, how often it was written
  std::vector<SimNode> nodes_;
  int crashes_left_ = 0;
  int failures_left_ = 0;
  int signals_left_ = 0;
  int hangs_left_ = 0;
  std::map<uint64_t, RoundRecord> rounds_;
  std::vector<std::string> log_;
  std::string problem_;
};

struct ExploreResult {
  std::size_t states = 0;
  std::size_t terminals = 0;
  std::string failure;  // "" when everything held
};

ExploreResult explore(const Scenario& scenario);

}  // namespace ddprun::rendezvous::round::model
