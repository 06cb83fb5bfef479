#pragma once
// What the agent does about a hang, whichever watchdog found it: before any signal, the round
// hears of it (RoundHooks::hang_detected, so the other nodes capture their workers' stacks too,
// while their ranks still wait on the hung one), and the stacks of every live local worker are
// captured (StackCaptureRunner, in the loop, bounded by kHangCaptureLimit) under
// <attempt dir>/stacks/. Then each hung rank gets one "ddprun: ... hung: ..." stderr line and the
// events file a "hang" event. Once the round also answered (peers_captured(): the others are
// done, or its own bound passed), the worker is signalled: the signal its expired timer asked
// for, or SIGKILL (to its process group) for a silent one. A Python worker that is to be
// SIGKILLed while py-spy is absent gets SIGABRT first, so Python's faulthandler writes its
// traceback (python_traceback_fallback.hpp); once it exited, the traceback goes into its stack
// file and a second line names its Python frames (or, after kFaulthandlerExitLimit, it is
// SIGKILLed as any). capture_for_peer() is the other side:
// another node's worker hung, and this node's stacks go to the same place, announced by a
// "peer_stacks" event.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/event_log.hpp"
#include "agent/base/watched_worker.hpp"
#include "agent/stacks/capture_run.hpp"
#include "agent/watchdog/hang/hang_report.hpp"
#include "agent/workers/worker_env.hpp"

namespace ddprun::agent {

// The whole stack capture of one hang: a tool that hangs must not hold up the restart.
inline constexpr std::chrono::seconds kHangCaptureLimit{10};
// One tool's share of it (py-spy, then eu-stack or gdb, per worker).
inline constexpr std::chrono::seconds kHangCaptureToolTimeout{5};

class HangResponder {
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
  // python_stacks: whether py-spy may help (not for the bundled trainer, which has no Python).
  HangResponder(boost::asio::io_context& io, const EnvMap& agent_env, StackTools tools,
                bool python_stacks, EventLog& events, std::string host,
                std::function<void()> before_print, RoundHooks round);
  ~HangResponder();
  HangResponder(const HangResponder&) = delete;
  HangResponder& operator=(const HangResponder&) = delete;

  // A new group: its attempt folder ("" when file logs are off) and, once spawned, its workers.
  void prepare_group(const std::string& attempt_dir);
  void group_started(std::vector<WatchedWorker> workers);
  // An exited worker can no longer hang, and its pid is no longer trusted.
  void worker_exited(pid_t pid);
  bool live(pid_t pid) const;
  // Nothing more is detected or signalled; a capture under way is cancelled.
  void stop();

  // From a watchdog driver: these ranks hung.
  void on_hung(std::vector<HungRank> ranks);
  void peers_captured();
  void capture_for_peer();
  // Someone asked for the stacks (`ddprun stacks`): captured as for another node's hang
  // (nobody is signalled; joins a capture under way), then done(stacks folder) runs from the
  // loop; done("") when there was nothing to capture or the group stopped first.
  void capture_on_request(std::function<void(const std::string&)> done);
  std::optional<std::string> hang_message(pid_t pid) const;
  // py-spy was looked for and not found: Python frames need faulthandler's route.
  bool lacks_py_spy() const { return python_stacks_ && !tools_.py_spy; }

 private:
  void start_capture();
  void finish_capture(CaptureRun::Results results);
  void adopt_queued_hangs();
  void start_queued_capture();
  void signal_hung_workers();
  void answer_round();
  void answer_requests(const std::string& stacks_dir);
  bool capture_wanted() const;
  void act_on(const HungRank& rank);
  void kill_hung(const HungRank& rank);
  void abort_for_traceback(const HungRank& rank, const WatchedWorker& worker);
  void traceback_written(const HungRank& rank, const WatchedWorker& worker);
  void abort_limit_passed();
  const WatchedWorker* watched(pid_t pid) const;
  std::string stacks_dir_for_capture();

  boost::asio::io_context& io_;
  const EnvMap& agent_env_;
  StackTools tools_;
  bool python_stacks_ = true;
  EventLog& events_;
  std::string host_;
  std::function<void()> before_print_;
  RoundHooks round_;

  // generation_ changes whenever waits are abandoned: a handler already queued when its wait
  // was cancelled sees the change and does nothing.
  std::uint64_t generation_ = 0;
  bool active_ = false;
  std::string attempt_dir_;
  int captures_ = 0;  // in this group: the first goes to stacks/, later ones to stacks_<n>/
  std::vector<WatchedWorker> workers_;                             // live ones only
  std::vector<std::function<void(const std::string&)>> requests_;  // capture_on_request's
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
  std::unique_ptr<CaptureRun> capture_;  // the capture running, if any
  boost::asio::steady_timer capture_limit_;
  std::string fallback_dir_;  // a temporary folder for stacks when file logs are off

  // Hung Python workers sent SIGABRT for their faulthandler traceback, until they exit.
  struct Aborted {
    HungRank rank;
    WatchedWorker worker;
  };
  std::vector<Aborted> aborted_;
  boost::asio::steady_timer abort_limit_;
};

}  // namespace ddprun::agent
