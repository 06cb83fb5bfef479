#pragma once
// The agent's one event loop. Everything that happens to an agent arrives here as an event on
// one Asio io_context, on one thread: signals and worker exits (through the signal channel's
// descriptor), worker output (pipes), timers, and the rendezvous store's replies (the backend).
// The round machine decides; this loop carries out its decisions: start the workers with an
// assignment, stop them (the signal, SIGKILL after the shutdown timeout), host the workers'
// store, report, and finish with an exit status. Nothing here blocks for long and no thread is
// left behind: the only threads are the hosted stores' event loops and the health-check
// server's, joined on destruction. With --health-check, the node checks run before each join
// (the machine asks, agent/node_check/ runs them as bounded children, the loop answers). With a
// health-check server, the loop records its progress on a timer and at each event, so a stalled
// loop shows as 503 there.

#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/agent_config.hpp"
#include "agent/base/event_log.hpp"
#include "agent/base/round_types.hpp"
#include "agent/health/health_board.hpp"
#include "agent/health/health_server.hpp"
#include "agent/health/job_view_exchange.hpp"
#include "agent/health/page_stacks.hpp"
#include "agent/health/round_timings.hpp"
#include "agent/logs/log_layout.hpp"
#include "agent/loop/live_reports.hpp"
#include "agent/loop/signal_channel.hpp"
#include "agent/node/node_rendezvous.hpp"
#include "agent/node_check/node_check_driver.hpp"
#include "agent/stacks/stacks_on_demand.hpp"
#include "agent/watchdog/hang_watchdog.hpp"
#include "agent/watchdog/progress/straggler_watch.hpp"
#include "agent/workers/live_control.hpp"
#include "agent/workers/worker_env.hpp"
#include "agent/workers/worker_group.hpp"
#include "rendezvous/backends/round_driver.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

class AgentLoop final : public rendezvous::backends::RoundListener,
                        public rendezvous::backends::StackCapturer,
                        public rendezvous::backends::NodeChecker {
 public:
  // signals must outlive the loop; it was made before any thread, so every thread blocks the
  // handled signals and they reach the loop through its descriptor.
  AgentLoop(const AgentConfig& config, SignalChannel& signals, EventLog& events);
  ~AgentLoop() override;
  AgentLoop(const AgentLoop&) = delete;
  AgentLoop& operator=(const AgentLoop&) = delete;

  // Runs the job to its end; returns the agent's exit status.
  int run();

  // RoundListener: the machine's decisions.
  void host_workers_store(uint64_t round) override;
  void start_workers(const RoundInfo& round) override;
  void stop_workers(const rendezvous::round::StopWorkers& stop) override;
  void notice(const rendezvous::round::Notice& notice) override;
  void finished(const rendezvous::round::Finish& finish) override;
  // StackCapturer: the watchdog's hang protocol.
  void capture_stacks(const rendezvous::round::CaptureStacks& request) override;
  void peers_captured_stacks() override;
  // NodeChecker: --health-check, before each join.
  void check_node(const rendezvous::round::CheckNode& request) override;

 private:
  // Why the group is being stopped: its own first failure (then the failures are reported once
  // it is down), or the round's StopWorkers (then WorkersStopped is, with the failures of
  // workers that ended on their own). While failures are gathered the signal is held: with
  // kNo after a local failure, with kForRound for a round's stop because peers failed.
  enum class Stopping { kNo, kAfterFailure, kForRound };

  void watch_signals();
  void on_signals();
  void watch_pump(std::size_t index);
  void after_reap();
  // A worker failed: stop the group now, or look again shortly while others may still fail on
  // their own (agent/workers/failure_gathering.hpp), so that each is listed with its own exit.
  void gather_failures();
  void workers_gone();
  void begin_stop(int signal, Stopping why);
  // After the stop's SIGKILL: a timer until the next worker's reap wait ends, then the stuck
  // ones are abandoned and the group counts as stopped.
  void wait_for_killed_workers();
  void abandon_stuck_workers();
  void report_failures();
  // --recovery live (agent/workers/live_control.hpp): on a membership change, keep workers that
  // joined the protocol (they abort their collectives and wait); on the next round's start,
  // hand them its world instead of starting new ones. Each returns false when the ordinary
  // stop or start must run instead.
  bool park_for_live_recovery();
  bool resume_parked_workers(const RoundInfo& round);
  void live_recovery_fallback(const std::string& reason);
  void round_hooks_started(const RoundInfo& round);
  void record_workers_event(const char* name, const RoundInfo& round);
  void round_hooks_ended();
  std::vector<WorkerLaunch> plan_workers(const RoundInfo& round);
  std::vector<WorkerLaunch> plan_launches(const RoundInfo& round,
                                          const std::string& attempt_dir) const;
  std::vector<WorkerFailure> local_failures() const;
  void end_open_console_lines();
  // The hang watchdog's side of the round.
  void hang_detected(const std::string& report);
  void stacks_captured();
  void report_local_failures(const std::vector<WorkerFailure>& failures);
  void write_agent_error_file(const std::vector<WorkerFailure>& failures) const;
  // The health-check server's side: progress and the round's state, now and on a timer.
  bool start_health_server();
  void report_health();
  // with_series: the step-interval charts too (the job page is looked at).
  HealthState health_state(bool with_series);
  JobFacts job_facts() const;
  void tick_health();

  const AgentConfig& config_;
  SignalChannel& signals_;
  EventLog& events_;
  std::string host_;
  LogDirectory logs_;
  EnvMap inherited_env_;
  std::string prefix_template_;

  boost::asio::io_context io_;
  boost::asio::posix::stream_descriptor signal_fd_;
  std::unique_ptr<NodeRendezvous> rendezvous_;      // from run() on
  std::optional<StacksOnDemand> stacks_on_demand_;  // with rendezvous_, over its backend
  std::optional<StragglerWatch> straggler_watch_;   // likewise, with heartbeats and a factor
  std::optional<JobViewExchange> job_view_;         // likewise, with the health port
  std::optional<PageStacks> page_stacks_;           // likewise

  // The running group, and what the loop is doing with it.
  std::optional<WorkerGroup> group_;
  std::optional<RoundInfo> round_;
  std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> pump_fds_;
  bool outcome_reported_ = false;  // WorkersSucceeded/WorkersFailed fed for this group
  Stopping stopping_ = Stopping::kNo;
  // When the group's first failure was seen, while the stop waits for others failing with it.
  std::optional<WorkerClock::time_point> gathering_since_;
  int held_round_signal_ = SIGTERM;  // a round's stop held while peers' failures are gathered
  boost::asio::steady_timer gather_timer_;
  boost::asio::steady_timer kill_timer_;
  boost::asio::steady_timer reap_timer_;
  boost::asio::steady_timer close_timer_;
  boost::asio::steady_timer health_timer_;
  RoundTimings round_timings_{RoundTimings::Clock::now()};  // for /metrics
  uint64_t rounds_started_ = 0;
  std::map<int, uint64_t> beats_by_local_rank_;  // the running group's progress heartbeats
  std::string trainer_metrics_path_;  // where the bundled trainer's rank 0 copies its metrics
  // --recovery live: the group's control file (empty: none), and whether the group is parked
  // (kept through a membership change, waiting for the next round's world).
  std::string live_control_path_;
  bool parked_ = false;
  LiveReports live_reports_;  // a worker's collective broke: the round re-forms at once
  std::optional<JobFacts> job_facts_;
  std::string node_check_result_;  // --health-check: the last one, for the job page  // for the job
                                   // page, built at the first report
  HealthBoard health_board_;       // before the server, which reads it
  std::optional<HealthServer> health_server_;  // TORCHELASTIC_HEALTH_CHECK_PORT given
  // After io_: their descriptors and timers belong to io_ and must go first.
  HangWatchdog watchdog_;
  std::optional<NodeCheckDriver> node_checks_;  // --health-check given

  std::optional<int> exit_status_;
  // Workers abandoned as stuck after SIGKILL, of this group or earlier ones: never signalled
  // again; should one exit after all, it is reaped here without a word.
  std::vector<pid_t> abandoned_pids_;
};

}  // namespace ddprun::agent
