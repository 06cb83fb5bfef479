#pragma once
// One node's side of the round protocol, as a deterministic state machine in the style of
// etcd's raft: events in (store replies, timer ticks with the time as a value, the local worker
// group, signals), effects out (key-value ops to issue, workers to start or stop, notices, the
// final exit). No sockets, clocks, threads or processes inside: the same events always give
// the same effects, so tests replay exact interleavings of several nodes against a simulated
// store, and a scale simulator runs thousands of machines in one process.
//
// The machine owns: joining a round (c10d's join counter, last call and close, or static's
// fixed ranks), the node checks before each join, late and waiting nodes, rank assignment, the
// workers' store address, heartbeats and loss, failure publication and counting against
// max_restarts, fencing (every key is per round, and replies from an abandoned step are ignored),
// the exit barrier, closing the job and leaving after a signal.
//
// Store layout (round_keys.hpp): job-wide keys under ddprun/rdzv/<run_id>/, a round's under
// .../r<round>/. Keys are never deleted; claims are compare-and-set, so each round has one
// closer, one assignment publisher and one failure decision.
//
// Threading: none. Call step() and take_effects() from one thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rendezvous/round/heartbeat_monitor.hpp"
#include "rendezvous/round/join_policy.hpp"
#include "rendezvous/round/machine_config.hpp"
#include "rendezvous/round/machine_io.hpp"
#include "rendezvous/round/machine_time.hpp"
#include "rendezvous/round/records.hpp"
#include "rendezvous/round/round_decisions.hpp"
#include "rendezvous/round/round_keys.hpp"

namespace ddprun::rendezvous::round {

class RoundMachine {
 public:
  explicit RoundMachine(MachineConfig config);

  // Feeds one event that happened at now. Effects accumulate until take_effects().
  void step(const MachineEvent& event, MachineTime now);
  std::vector<MachineEffect> take_effects();

  // The earliest time the machine wants a TimerFired; nullopt when it only waits for events.
  std::optional<MachineTime> next_deadline() const;

  bool finished() const { return phase_ == Phase::kDone; }
  // The round this node takes part in, once one formed.
  std::optional<uint64_t> current_round() const;
  const char* phase_name() const;
  // Everything that determines future behaviour, as text: two machines with equal digests
  // behave alike from here on (the model checker merges such states).
  std::string digest() const;
  const MachineConfig& config() const { return config_; }

 private:
  enum class Phase : uint8_t {
    kIdle,
    kNodeCheck,       // before a join: the node's checks run, or failed and wait to run again
    kCheckingConfig,  // first join: do all agents agree on --nnodes?
    kJoining,         // dynamic: join counter, record, last call, close
    kLate,            // dynamic: the round closed without us; waiting for it to end
    kStaticJoining,   // static: record, node 0 assigns
    kForming,         // assignment read, workers' store being hosted or looked up
    kRunning,         // workers run; watching the round
    kExitBarrier,     // local workers succeeded; waiting for the others
    kClosing,         // the job ends: close the rendezvous
    kLeaving,         // stopped by a signal: leave so the others can scale down
    kDone,
  };
  enum class Workers : uint8_t { kNone, kRunning, kStopping, kSucceeded };
  // What happens once the workers the machine asked to stop have stopped.
  enum class AfterStop : uint8_t {
    kNothing,
    kReform,
    kAwaitDecision,
    kFailJob,
    kLeave,
    kStoreLost
  };
  // What an op's reply is for. Where each step's reply is handled:
  //   round_machine_join.cpp   on_reply, by group: the --nnodes check (on_config_reply), the
  //                            dynamic join's counts (on_join_count_reply) and close
  //                            (on_close_reply), the static join (on_static_join_reply), the
  //                            assignment and the workers' store (on_assignment_reply)
  //   round_machine_watch.cpp  on_running_reply: heartbeats, loss, wake-ups and hangs
  //                            (on_watch_reply), the round's state (on_round_state_reply)
  //   round_machine_end.cpp    on_ending_reply: a failure (on_failure_reply), the exit barrier
  //                            (on_exit_barrier_reply), closing and leaving (on_closing_reply)
  // A step no group claims is an internal error.
  enum class Step : uint8_t {
    kConfigClaim,
    kMismatchCloseClaim,
    kMismatchClosed,
    kMismatchStaticFill,
    kRoundClaim,
    kPrevLost,
    kPrevWaiting,
    kReformSet,
    kJobClosedCheck,
    kExpectedClaim,
    kExpectedRead,
    kJoinedAdd,
    kRecordSet,
    kAwaitClose,
    kClosedRead,
    kCloseClaim,
    kClosedSet,
    kJoinedCount,
    kTimeoutCount,
    kWaitingAdd,
    kWakeRound,
    kReformWait,
    kRoundAdvanceLate,
    kStaticRound,
    kStaticRecordsWait,
    kStaticCountPresent,
    kRecordsWait,
    kRecordsRead,
    kRestartsRead,
    kAssignPublish,
    kAssignWait,
    kAssignRead,
    kMasterSet,
    kMasterWait,
    kMasterRead,
    kBeat,
    kProbe,
    kLossCheckExit,
    kLostAdd,
    kSuspectWaiting,
    kSuspectLost,
    kSuspectClaim,
    kLeftAddForLost,
    kAllLeftSet,
    kAllLeftSetForLost,
    kInterrupt,
    kLostRecordRead,
    kWakeWait,
    kStateFailed,
    kStateLost,
    kStateWaiting,
    kFailClaimCheck,
    kFailLostCheck,
    kFailAppend,
    kFailClaim,
    kFailedWait,
    kFailedRead,
    kRestartsAdd,
    kExitCountRead,
    kFailedSet,
    kExitAdd,
    kExitDoneSet,
    kExitWait,
    kExitDoneRead,
    kFailuresRead,
    kCloseJob,
    kCloseReform,
    kCloseNewest,
    kCloseLaterClaim,
    kCloseLaterSet,
    kCloseLaterStatic,
    kLeftAdd,
    kAllLeftWait,
    kLeaveLost,
    kLeaveWake,
    kHangPublish,
    kHangAcksWait,
    kHangWait,
    kHangRead,
    kHangAck,
  };
  // Ops are grouped by the activity they serve, so an activity that ends cancels its own.
  enum class Group : uint8_t { kFlow, kWatch, kReport };
  struct Pending {
    Step step;
    Group group;
    bool is_wait;
    int64_t aux;  // a round or slot the reply refers to
  };

  // Joining (dynamic).
  struct Join {
    uint64_t round = 0;
    int expected = 0;  // nodes the round should gather; 0 unknown
    int slot = 0;
    int replies_outstanding = 0;
    bool closed_by_me = false;
    bool job_closed = false;
    bool job_succeeded = false;
    MachineTime deadline{};  // join_timeout, across late rounds
    std::optional<JoinStateMachine> decisions;
    int prev_lost = 0;
    int prev_waiting = 0;
  };
  // Watching a running round.
  struct Watch {
    bool heartbeats = false;
    MachineTime next_beat{};
    MachineTime next_probe{};
    MachineTime probe_issued{};
    bool beat_outstanding = false;
    bool probe_outstanding = false;
    std::optional<HeartbeatMonitor> monitor;
    bool neighbor_seen = false;
    bool declared_loss = false;
    bool suspected = false;  // CollectiveBroke reported this round
    bool reading_state = false;
    int state_replies = 0;
    WakeObservation seen;
    std::optional<MachineTime> repoll;
    MachineTime last_answer{};
    bool slowness_reported = false;
    // A hung worker on this node: published in this round; PeersCapturedStacks still owed.
    bool hang_published = false;
    bool awaiting_peer_stacks = false;
    // This node's stacks asked for (by another node's hang, or by its own) and acknowledged.
    bool stacks_asked = false;
    bool stacks_acked = false;
  };
  // A local failure being published and decided.
  struct Report {
    std::vector<WorkerFailure> failures;
    int checks_outstanding = 0;
    bool claimed = false;
    bool lost_seen = false;
    int64_t restarts_after = 0;
    std::optional<FailureDecision> decision;
    bool uncounted = false;  // a consequence of a lost node: re-form, nothing counted
  };
  struct Formed {
    uint64_t round = 0;
    int slot = 0;
    Assignment assignment;
    std::string master_addr;
    uint16_t master_port = 0;
  };

  // Issuing.
  uint64_t issue(Step step, KvOp op, Group group = Group::kFlow, int64_t aux = 0);
  void cancel_group(Group group);
  template <class Effect>
  void emit(Effect&& effect) {
    effects_.emplace_back(std::in_place_type<std::decay_t<Effect>>, std::forward<Effect>(effect));
  }
  void notice(std::string kind, std::string text);
  void finish(int status, std::string reason, std::vector<WorkerFailure> failures = {});
  void fail_rendezvous(const std::string& message);
  bool elastic() const { return config_.mode == RoundMode::kDynamic; }
  int participants() const;

  // Replies, by the phase their steps belong to (the map above Step says which handler and file
  // each step's reply goes to). A group's handler says whether the step was its own, and
  // whether the reply counts down the join's outstanding replies.
  enum class Handled : uint8_t { kNotMine, kDone, kCountsDown };
  void on_reply(const Pending& pending, const KvResult& result, MachineTime now);
  Handled on_config_reply(const Pending& pending, const KvResult& result, MachineTime now);
  Handled on_join_count_reply(const Pending& pending, const KvResult& result, MachineTime now);
  Handled on_close_reply(const Pending& pending, const KvResult& result, MachineTime now);
  Handled on_static_join_reply(const Pending& pending, const KvResult& result, MachineTime now);
  Handled on_assignment_reply(const Pending& pending, const KvResult& result, MachineTime now);
  void count_down_join_replies(Step step, MachineTime now);
  void on_running_reply(const Pending& pending, const KvResult& result, MachineTime now);
  bool on_watch_reply(const Pending& pending, const KvResult& result, MachineTime now);
  bool on_round_state_reply(const Pending& pending, const KvResult& result, MachineTime now);
  void on_ending_reply(const Pending& pending, const KvResult& result, MachineTime now);
  bool on_failure_reply(const Pending& pending, const KvResult& result, MachineTime now);
  void failure_checks_done(MachineTime now);
  bool on_exit_barrier_reply(const Pending& pending, const KvResult& result);
  bool on_closing_reply(const Pending& pending, const KvResult& result);
  void close_rounds_after(const std::string& newest_text);
  void on_kv_error(const Pending& pending, const KvError& error, MachineTime now);
  void on_timer(MachineTime now);
  void on_signal(int signal, MachineTime now);
  void on_workers_stopped(MachineTime now);

  // Joining (round_machine_join.cpp).
  void begin_join(MachineTime now);
  void check_config_reply(const std::string& stored);
  void begin_dynamic_round(MachineTime now);
  void join_round(uint64_t round, MachineTime now);
  void join_replies_done(MachineTime now);
  void act(const JoinAction& action, MachineTime now);
  void become_late(int participants, MachineTime now);
  void join_timed_out(int joined);
  void begin_static_round(uint64_t round, MachineTime now);
  void publish_assignments(const std::vector<std::optional<std::string>>& records,
                           int64_t restarts);
  // The closed count, the assignment and the workers' store address, read or seen by a wait.
  void closed_read(const std::string& text, MachineTime now);
  void assignment_read(const std::string& text, MachineTime now);
  void master_read(const std::string& text, MachineTime now);
  void workers_store_known(std::string addr, uint16_t port, MachineTime now);

  // Running (round_machine_watch.cpp).
  void start_round(MachineTime now);
  void watch_timer(MachineTime now);
  void probe_answered(const KvLiveness& liveness, MachineTime now);
  void suspect_loss();
  void declare_loss(MachineTime now);
  void read_round_state();
  void round_state_read(MachineTime now);
  void hang_detected(const std::string& report);
  void collective_broke();
  void suspicion_checked(const Pending& pending, const KvResult& result);
  void suspicion_claimed(const KvResult& result);
  void wait_for_peer_hang();
  void capture_for_peer_hang(const std::string& stored_report);
  void stacks_captured();
  void release_hung_worker(bool peers_answered);
  void stop_workers(int signal, AfterStop after, bool peers_failed = false,
                    bool membership_change = false);
  void workers_stopped(std::vector<WorkerFailure> own_failures, MachineTime now);
  void reform(MachineTime now);

  // Failures, success, ending (round_machine_end.cpp).
  void report_failure(std::vector<WorkerFailure> failures);
  void report_checks_done(MachineTime now);
  void publish_failure();
  void decision_known(FailureDecision decision, MachineTime now);
  void after_report(MachineTime now);
  void enter_exit_barrier(MachineTime now);
  void fail_job();
  void close_job(int status, std::string reason, std::vector<WorkerFailure> failures);
  void close_later_rounds();
  void close_step_done(MachineTime now);
  void leave(MachineTime now);
  void leave_step_done();

  // Node checks before each join (round_machine_join.cpp).
  void check_node();
  void node_checked(const NodeChecked& checked, MachineTime now);

  MachineConfig config_;
  RoundKeys keys_;
  Phase phase_ = Phase::kIdle;
  Workers workers_ = Workers::kNone;
  AfterStop after_stop_ = AfterStop::kNothing;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;
  std::vector<MachineEffect> effects_;

  bool config_checked_ = false;
  std::string mismatch_message_;
  Join join_;
  std::optional<Formed> current_;  // the round this node takes part in
  // The closing node's reads for the assignment: the node records and the restart counter.
  std::vector<std::optional<std::string>> records_;
  int64_t restarts_read_ = 0;
  std::optional<int> last_restart_count_;
  Watch watch_;
  RoundSignal signal_ = RoundSignal::kNone;  // once decided for the round, it stays
  std::optional<Report> report_;
  std::optional<int> stop_signal_;  // a handled signal that ends the agent
  // Closing: what Finish says once the close steps are done.
  int close_status_ = kExitSuccess;
  std::string close_reason_;
  std::vector<WorkerFailure> close_failures_;
  // This node's workers that failed on their own while the round stopped them (peers failed
  // elsewhere at the same moment): published with the round's failures, and in its summary.
  std::vector<WorkerFailure> stopped_failures_;
  int close_outstanding_ = 0;
  std::optional<MachineTime> leave_deadline_;
  // Node checks: passed for the join about to begin; when a failed check runs again.
  bool node_check_passed_ = false;
  std::optional<MachineTime> node_check_retry_;
  int leave_outstanding_ = 0;
};

}  // namespace ddprun::rendezvous::round
