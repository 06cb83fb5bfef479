#pragma once
// The hang watchdogs of one agent, driven by its event loop: torchrun's file timer
// (TORCHELASTIC_ENABLE_FILE_TIMER=1, FileTimerDriver) and ddprun's progress heartbeat
// (--watchdog-timeout, HeartbeatDriver) find hangs; HangResponder captures stacks, reports, and
// signals once the round has answered. This class only wires them to the group's lifetime.
//
// Lifetime: one per agent. Per group: prepare_group() before the spawn, group_started() with
// the pids, worker_exited() after each reap, stop_watching() when the agent starts stopping
// the group, group_gone() once its workers have exited.

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/agent_config.hpp"
#include "agent/base/event_log.hpp"
#include "agent/watchdog/file_timer_driver.hpp"
#include "agent/watchdog/hang/hang_responder.hpp"
#include "agent/watchdog/heartbeat_driver.hpp"
#include "agent/workers/worker_env.hpp"
#include "agent/workers/worker_group.hpp"

namespace ddprun::agent {

class HangWatchdog {
 public:
  using RoundHooks = HangResponder::RoundHooks;
  // before_print: ends the console's open lines (a worker's partial line must not swallow ours).
  HangWatchdog(boost::asio::io_context& io, const WatchdogConfig& config, const WorkerSpec& workers,
               const EnvMap& agent_env, EventLog& events, std::string host,
               std::function<void()> before_print, RoundHooks round,
               HeartbeatDriver::BeatObserver on_beats = {});
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // Before the spawn: creates this start's FIFO (when enabled) and heartbeat pipes (with
  // --watchdog-timeout) and adds their variables and descriptors to the launches; with either
  // on and py-spy absent, Python workers get PYTHONFAULTHANDLER=1 unless the job set it
  // (python_traceback_fallback.hpp). attempt_dir
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
  std::optional<std::string> hang_message(pid_t pid) const { return responder_.hang_message(pid); }
  // The round's answer to hang_detected: the hung workers may be signalled once their own
  // stacks are captured.
  void peers_captured() { responder_.peers_captured(); }
  // Another node's worker hung: captures the local workers' stacks (or joins the capture under
  // way), then calls the round's stacks_captured, also when the capture is cancelled or there
  // is nothing to capture.
  void capture_for_peer() { responder_.capture_for_peer(); }
  // `ddprun stacks`: the local workers' stacks, captured without signalling anyone; then
  // done(folder), or done("") when there was nothing to capture.
  void capture_on_request(std::function<void(const std::string&)> done) {
    responder_.capture_on_request(std::move(done));
  }

 private:
  const EnvMap& agent_env_;
  bool python_entry_ = false;  // a script or -m: Python's faulthandler can help
  bool heartbeat_on_ = false;
  // Per local rank, from this start's launches: its stderr and faulthandler (WatchedWorker).
  std::map<int, WatchedWorker> launched_;
  HangResponder responder_;
  FileTimerDriver file_timer_;
  HeartbeatDriver heartbeat_;
};

}  // namespace ddprun::agent
