#pragma once
// What goes into the round machine (events) and what comes out (effects). The driver turns
// store replies, timers, the local worker group and signals into events, and carries out the
// effects in the order they come. Every event comes with the time as a value on a monotonic
// clock (MachineTime); the machine has no clock of its own.
//
// Driver duties, in order (the machine relies on them):
//  1. Carry out IssueKv effects in the order emitted: a backend keeps one node's non-wait ops
//     in order, so a write the machine issued first is applied first.
//  2. Start workers only on StartWorkers, and answer every StopWorkers with WorkersStopped once
//     every worker of the group has been reaped (never before: the next round's workers must
//     not meet the old ones), or abandoned as one SIGKILL cannot end (the agent's bounded
//     wait, agent/workers/stuck_workers.hpp).
//     The one exception: a StopWorkers for a membership change under live recovery, answered
//     at once while the workers stay up and wait for the next round's world (they meet the
//     next round's workers on purpose, through its fresh store).
//  3. Answer HostWorkersStore with WorkersStoreHosted or WorkersStoreFailed.
//  4. Arm one timer for next_deadline() after every step, and feed TimerFired when it passes.
//  5. Stop feeding events after Finish; drop pending ops (their replies are ignored anyway).
//  6. Answer every CaptureStacks and HangDetected with StacksCaptured, in bounded time.
//  7. Answer every CheckNode with NodeChecked, in bounded time (the checks are bounded).

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/round/kv_ops.hpp"
#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {

// ---- Events ----

// Start the rendezvous (once).
struct Begin {};
// The backend answered op `id`.
struct KvAnswered {
  uint64_t id = 0;
  KvResult result;
};
// next_deadline() passed.
struct TimerFired {};
// Answer to HostWorkersStore: where the fresh store for this round's workers listens.
struct WorkersStoreHosted {
  std::string addr;
  uint16_t port = 0;
};
struct WorkersStoreFailed {
  std::string message;
};
// Every local worker exited 0.
struct WorkersSucceeded {};
// A local worker failed (the group failed as a whole, torchrun's gang semantics): the
// failures observed, earliest first. The survivors still run until StopWorkers.
struct WorkersFailed {
  std::vector<WorkerFailure> failures;
};
// Answer to StopWorkers: every worker of the group has exited and been reaped (or abandoned).
// failures: those that failed on their own before the stop reached them (ranks of one job often
// fail together), earliest first; they join the round's failures for the summary.
struct WorkersStopped {
  std::vector<WorkerFailure> failures;
};
// A handled signal (SIGTERM, SIGINT, ...) reached the agent.
struct SignalReceived {
  int signal = 0;
};
// The agent's watchdog found a local worker hung. The agent captures its own workers' stacks
// (StacksCaptured when done) and holds back the hung worker's signal until
// PeersCapturedStacks: the other nodes' ranks still wait on it, and their stacks show where.
// report: one line naming this node and the hung ranks, for the other nodes' notice.
struct HangDetected {
  std::string report;
};
// A local worker's collective failed and it waits for a new world (live recovery): a peer is
// probably gone. The round re-forms at once instead of when the heartbeats say so; the first node
// to report it counts one node lost (the round then expects one node fewer, as after a loss),
// the others' reports of the same round add nothing. Ignored unless the round runs undisturbed.
struct CollectiveBroke {};
// Answer to CaptureStacks and to HangDetected: this node's workers' stacks are written (or
// their capture ended).
struct StacksCaptured {};

// Answer to CheckNode: whether this node passed its checks; reason names the failed check and
// why ("health check command: exit status 3: disk bad").
struct NodeChecked {
  bool passed = true;
  std::string reason;
};

using MachineEvent =
    std::variant<Begin, KvAnswered, TimerFired, WorkersStoreHosted, WorkersStoreFailed,
                 WorkersSucceeded, WorkersFailed, WorkersStopped, SignalReceived, HangDetected,
                 StacksCaptured, NodeChecked, CollectiveBroke>;

// ---- Effects ----

struct IssueKv {
  uint64_t id = 0;
  KvOp op;
};
// A pending op nobody waits for any more (a KvWait): the backend may drop it.
struct CancelKv {
  uint64_t id = 0;
};
// Start a fresh store for this round's workers (this node is the round's rank 0).
struct HostWorkersStore {
  uint64_t round = 0;
};
struct StartWorkers {
  RoundInfo round;
};
// Send `signal` to every local worker, SIGKILL what is left after the shutdown timeout.
// peers_failed: the stop is for workers that failed on another node; those here may be failing
// with them, and the agent lets the ones on their way out finish first.
// membership_change: the stop is only because nodes were lost or are waiting to join (no worker
// failed); workers that take part in live recovery may stay up (the agent's --recovery live):
// the driver then answers WorkersStopped at once and hands them the next round's world instead
// of starting new ones.
struct StopWorkers {
  int signal = 0;
  bool peers_failed = false;
  bool membership_change = false;
};
// Something the user should hear about: one line on the agent's stderr, and an event record.
// kind is the event name ("restart", "membership_change", "node_lost", ...).
struct Notice {
  std::string kind;
  std::string text;
  uint64_t round = 0;
};
// The agent is done. failures: the job-wide failures, root cause first, when the job failed
// because workers failed (the summary table); empty otherwise.
struct Finish {
  int exit_status = 0;
  std::string reason;
  std::vector<WorkerFailure> failures;
};

// A worker hung on another node (report names it): capture this node's workers' stacks now,
// while they still wait on it, and answer with StacksCaptured.
struct CaptureStacks {
  std::string report;
};
// Answer to HangDetected: every other node of the round captured its stacks, or
// MachineConfig::peer_stacks_wait passed, or there is no one to wait for. The hung worker
// may be signalled now. Not emitted when the machine stops the workers first.
struct PeersCapturedStacks {};
// Before each join (MachineConfig::node_check_interval set): run the node's checks and answer
// NodeChecked. round: the round the node would join next, for messages.
struct CheckNode {
  uint64_t round = 0;
};

using MachineEffect = std::variant<IssueKv, CancelKv, HostWorkersStore, StartWorkers, StopWorkers,
                                   Notice, Finish, CaptureStacks, PeersCapturedStacks, CheckNode>;

// Exit statuses. 128+N for a signal N, so a requeue wrapper can tell "preempted" from "failed"
// (torchrun exits 1 for both).
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline int exit_status_for_signal(int signal_number) {
  return 128 + signal_number;
}

}  // namespace ddprun::rendezvous::round
