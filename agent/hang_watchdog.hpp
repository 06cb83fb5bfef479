#pragma once
// The hang watchdogs of one agent, driven by its event loop: torchrun's file timer
// (TORCHELASTIC_ENABLE_FILE_TIMER=1) and ddprun's progress heartbeat (--watchdog-timeout).
// It owns the per-group parts (FileTimerServer, one HeartbeatChannel per worker, ProgressWatch)
// and waits on their descriptors and deadlines in the loop's io_context.
//
// On a hang, before any signal: the round hears of it (hang_detected, so the other nodes
// capture their workers' stacks too, while their ranks still wait on the hung one), and the
// stacks of every live local worker are captured (StackCaptureRunner, in the loop, bounded by
// kHangCaptureLimit) under <attempt dir>/stacks/. Then each hung rank gets one
// "ddprun: ... hung: ..." stderr line and the events file a "hang" event. Once the round also
// answered (peers_captured(): the others are done, or its own bound passed), the worker is
// signalled: the signal its expired timer asked for, or SIGKILL (to its process group) for a
// silent one. Its exit then takes the normal failure path; hang_message() gives the failure
// table its story. capture_for_peer() is the other side: another node's worker hung, and this
// node's stacks go to the same place, announced by a "peer_stacks" event.
//
// Lifetime: one per agent. Per group: prepare_group() before the spawn, group_started() with
// the pids, worker_exited() after each reap, stop_watching() when the agent starts stopping
// the group, group_gone() once its workers have exited.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/event_log.hpp"
#include "agent/file_timer_server.hpp"
#include "agent/hang_report.hpp"
#include "agent/heartbeat_channel.hpp"
#include "agent/progress_watch.hpp"
#include "agent/stack_capture_runner.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_group.hpp"
#include "launcher/launch_config.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

// The whole stack capture of one hang: a tool that hangs must not hold up the restart.
inline constexpr std::chrono::seconds kHangCaptureLimit{10};
// One tool's share of it (py-spy, then eu-stack or gdb, per worker).
inline constexpr std::chrono::seconds kHangCaptureToolTimeout{5};

class HangWatchdog {
 public:
  // The round's side of a hang (the agent feeds them to its round machine).
  struct RoundHooks {
    // A local hang (one line naming this node and the ranks); the round answers through
    // peers_captured(), possibly from inside the call.
    std::function<void(const std::string&)> hang_detected;
    // A capture the round waits for (a local hang's, or capture_for_peer()'s) ended: called
    // from the loop, never inside a call into this class.
    std::function<void()> stacks_captured;
  };
  // before_print: ends the console's open lines (a worker's partial line must not swallow ours).
  HangWatchdog(boost::asio::io_context& io, const launcher::LaunchConfig& config,
               const EnvMap& agent_env, EventLog& events, std::string host,
               std::function<void()> before_print, RoundHooks round);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // Before the spawn: creates this start's FIFO (when enabled) and heartbeat pipes (with
  // --watchdog-timeout) and adds their variables and descriptors to the launches. attempt_dir
  // is where stacks go ("" when file logs are off: then a temporary folder). Throws
  // std::runtime_error when the FIFO or a pipe cannot be made.
  void prepare_group(std::vector<WorkerLaunch>& launches, const std::string& attempt_dir);
  // After the spawn: the pids are known; starts waiting.
  void group_started(const std::vector<WorkerRecord>& workers);
  // After a reap: exited workers can no longer hang, and their pids are no longer trusted.
  void worker_exited(const std::vector<WorkerRecord>& workers);
  // The agent begins stopping the group: nothing more is detected or signalled, and a capture
  // under way is cancelled. The FIFO and the pipes stay until group_gone(): a worker's late
  // heartbeat must not meet a closed pipe (SIGPIPE) while it shuts down.
  void stop_watching();
  // Every worker of the group has exited (or the agent gave up on them): the FIFO and pipes go.
  void group_gone();

  // The failure-table message of a worker this watchdog reported hung (this group).
  std::optional<std::string> hang_message(pid_t pid) const;

  // The round's answer to hang_detected: the hung workers may be signalled once their own
  // stacks are captured.
  void peers_captured();
  // Another node's worker hung: captures the local workers' stacks (or joins the capture under
  // way), then calls the round's stacks_captured, also when the capture is cancelled or there
  // is nothing to capture.
  void capture_for_peer();

 private:
  void watch_timer_fifo();
  void arm_timer_deadline();
  void watch_heartbeat(std::size_t index);
  void arm_progress_deadline();
  void on_hung(std::vector<HungRank> ranks);
  void start_capture();
  void watch_capture();
  void advance_capture();
  void finish_capture();
  void adopt_queued_hangs();
  void start_queued_capture();
  void signal_hung_workers();
  void answer_round();
  void act_on(const HungRank& rank);
  bool live(pid_t pid) const;
  std::string stacks_dir_for_capture();

  boost::asio::io_context& io_;
  const launcher::LaunchConfig& config_;
  const EnvMap& agent_env_;
  EventLog& events_;
  std::string host_;
  std::function<void()> before_print_;
  RoundHooks round_;
  StackTools tools_;
  bool python_stacks_ = true;

  // This group. generation_ changes whenever waits are abandoned: a handler already queued
  // when its wait was cancelled sees the change and does nothing.
  std::uint64_t generation_ = 0;
  bool active_ = false;
  std::string attempt_dir_;
  int captures_ = 0;  // in this group: the first goes to stacks/, later ones to stacks_<n>/
  std::vector<WatchedWorker> workers_;  // live ones only
  std::optional<FileTimerServer> timer_server_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> timer_fd_;
  boost::asio::steady_timer timer_deadline_;
  struct Heartbeat {
    int local_rank = 0;
    HeartbeatChannel channel;
    std::unique_ptr<boost::asio::posix::stream_descriptor> wait;  // null once closed
  };
  std::vector<std::unique_ptr<Heartbeat>> heartbeats_;
  std::optional<ProgressWatch> progress_;
  boost::asio::steady_timer progress_deadline_;
  std::map<pid_t, std::string> hang_messages_;

  // The hang being handled, and those found meanwhile (handled next).
  std::vector<HungRank> capturing_;
  std::vector<HungRank> queued_;
  std::string capture_dir_;
  // Hung ranks whose stacks are captured, held until the round's answer (peers_pending_).
  std::vector<HungRank> to_signal_;
  bool peers_pending_ = false;
  // The round waits for the capture under way (or for the next one: a peer's request).
  bool round_waits_ = false;
  std::unique_ptr<StackCaptureRunner> runner_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> runner_fd_;
  boost::asio::steady_timer runner_deadline_;
  boost::asio::steady_timer capture_limit_;
  std::string fallback_dir_;  // a temporary folder for stacks when file logs are off
};

}  // namespace ddprun::agent
