#include "agent/loop/agent_loop.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "agent/base/node_name.hpp"
#include "agent/health/job_page_access.hpp"
#include "agent/health/node_record.hpp"
#include "agent/logs/log_prefix.hpp"
#include "agent/workers/error_file.hpp"
#include "agent/workers/failure_gathering.hpp"
#include "agent/workers/failure_summary.hpp"
#include "common/seconds.hpp"

namespace ddprun::rendezvous::round {
// A round as the event log's round_formed and workers_started events carry it, under the
// fields' own names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RoundInfo, round, group_rank, group_world_size, world_size,
                                   restart_count, master_addr, master_port, run_id)
}  // namespace ddprun::rendezvous::round

namespace ddprun::agent {

namespace {

namespace round = rendezvous::round;
using common::Seconds;
using common::steady;

// How long an ending agent waits for its rendezvous backend to release what it holds.
constexpr Seconds kBackendCloseLimit{2.0};

// How often a running loop tells the health-check server it progresses: often enough, within
// the stale-after timeout, that a loop that runs is never reported stalled.
constexpr Seconds kHealthTickLimit{1.0};

std::string worker_health(const WorkerRecord& worker, bool stopping) {
  if (worker.abandoned)
    return "abandoned";
  if (!worker.exit)
    return stopping ? "stopping" : "running";
  if (worker.exit->succeeded())
    return "succeeded";
  return worker.stopped_by_agent ? "stopped" : "failed";
}

nlohmann::json failure_fields(const WorkerFailure& failure) {
  return {{"rank", failure.global_rank},    {"local_rank", failure.local_rank},
          {"exit_code", failure.exit_code}, {"pid", failure.pid},
          {"host", failure.host},           {"message", failure.message}};
}

}  // namespace

AgentLoop::AgentLoop(const AgentConfig& config, SignalChannel& signals, EventLog& events)
    : config_(config),
      signals_(signals),
      events_(events),
      host_(node_name(config.rendezvous.local_addr)),
      logs_(config.logs.log_dir),
      inherited_env_(current_process_env()),
      signal_fd_(io_, ::dup(signals.fd())),
      gather_timer_(io_),
      kill_timer_(io_),
      reap_timer_(io_),
      close_timer_(io_),
      health_timer_(io_),
      live_reports_(io_,
                    [this](uint64_t generation) {
                      if (group_ && !parked_ && round_ && generation == round_->round &&
                          rendezvous_ && !exit_status_)
                        rendezvous_->driver().feed(round::CollectiveBroke{});
                    }),
      watchdog_(
          io_, config.watchdog, config.workers, inherited_env_, events, host_,
          [this] { end_open_console_lines(); },
          {[this](const std::string& report) { hang_detected(report); },
           [this] { stacks_captured(); }},
          [this](int local_rank, std::size_t beats) {
            beats_by_local_rank_[local_rank] += beats;
            if (straggler_watch_)
              straggler_watch_->on_beats(local_rank, beats);
          }) {
  if (config.node_check.command) {
    node_checks_.emplace(io_, config, inherited_env_, [this](round::NodeChecked checked) {
      if (checked.passed)  // a failure is the machine's notice, with the round and the retry
        events_.record("node_check_passed");
      node_check_result_ = checked.passed ? "passed" : "failed: " + checked.reason;
      if (rendezvous_ && !exit_status_)
        rendezvous_->driver().feed(std::move(checked));
    });
  }
  const char* templ = std::getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
  prefix_template_ = templ != nullptr ? templ : std::string(kDefaultPrefixTemplate);
}

AgentLoop::~AgentLoop() {
  // Workers first (the destructor kills what still runs), then the rendezvous.
  pump_fds_.clear();
  group_.reset();
  watchdog_.group_gone();
  straggler_watch_.reset();
  job_view_.reset();
  page_stacks_.reset();
  stacks_on_demand_.reset();
  node_checks_.reset();
  rendezvous_.reset();
}

int AgentLoop::run() {
  if (!start_health_server()) {
    return round::kExitFailure;
  }
  try {
    rendezvous_ = std::make_unique<NodeRendezvous>(config_.rendezvous, io_, *this, this,
                                                   node_checks_ ? this : nullptr);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: rendezvous failed: %s\n", error.what());
    events_.record("exit", {{"exit_code", round::kExitFailure},
                            {"reason", std::string("rendezvous error: ") + error.what()}});
    return round::kExitFailure;
  }
  std::fprintf(stderr, "ddprun: %s\n", rendezvous_->start_line().c_str());
  std::fflush(stderr);
  stacks_on_demand_.emplace(
      rendezvous_->driver().backend(), host_,
      [this](std::function<void(const std::string&)> done) {
        watchdog_.capture_on_request(std::move(done));
      },
      events_, [this] { end_open_console_lines(); });
  if (health_server_) {
    page_stacks_.emplace(rendezvous_->driver().backend(), health_board_, host_);
    job_view_.emplace(
        rendezvous_->driver().backend(), health_board_,
        [this] {
          return node_record_to_json(
              node_record_of(health_state(true), true, health_board_.last_progress_unix_s()));
        },
        health_server_->port());
  }
  if (config_.watchdog.heartbeat_timeout && config_.watchdog.straggler_factor > 0) {
    straggler_watch_.emplace(io_, rendezvous_->driver().backend(),
                             StragglerConfig{config_.watchdog.straggler_factor,
                                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 config_.watchdog.straggler_window)},
                             host_, events_, [this] { end_open_console_lines(); });
  }
  watch_signals();
  rendezvous_->driver().begin();
  if (!exit_status_) {
    io_.run();
  }
  if (!exit_status_) {
    std::fprintf(stderr, "ddprun: internal error: the agent's event loop ran out of work\n");
    return round::kExitFailure;
  }
  return *exit_status_;
}

void AgentLoop::watch_signals() {
  signal_fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                        [this](const boost::system::error_code& error) {
                          if (!error) {
                            on_signals();
                          }
                        });
}

void AgentLoop::on_signals() {
  const SignalChannel::Drained drained = signals_.drain();
  if (drained.child_exited) {
    reap_quietly(abandoned_pids_);
  }
  if (drained.child_exited && group_) {
    group_->reap();
    watchdog_.worker_exited(group_->workers());
    after_reap();
  }
  for (int sig : drained.handled_signals) {
    if (exit_status_) {
      break;
    }
    rendezvous_->driver().feed(round::SignalReceived{sig});
  }
  if (!exit_status_) {
    watch_signals();
  }
  report_health();
}

void AgentLoop::watch_pump(std::size_t index) {
  auto& descriptor = pump_fds_[index];
  if (!descriptor) {
    return;
  }
  descriptor->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                         [this, index](const boost::system::error_code& error) {
                           if (error || !group_ || index >= group_->output_pumps().size()) {
                             return;
                           }
                           OutputPump& pump = group_->output_pumps()[index];
                           pump.on_readable();
                           if (pump.open()) {
                             watch_pump(index);
                           } else {
                             pump_fds_[index].reset();
                           }
                         });
}

void AgentLoop::host_workers_store(uint64_t /*round*/) {
  rendezvous_->host_workers_store();
}

std::vector<WorkerLaunch> AgentLoop::plan_workers(const RoundInfo& round) {
  if (config_.workers.argv.empty())
    throw std::runtime_error("no worker command was given");
  const std::string attempt_dir = logs_.prepare_attempt(round.run_id, round.restart_count,
                                                        config_.rendezvous.shape.nproc_per_node);
  std::vector<WorkerLaunch> launches = plan_launches(round, attempt_dir);
  // The bundled trainer's rank 0 copies its metrics lines for the job page's curves.
  trainer_metrics_path_.clear();
  if (health_server_ && config_.workers.entry_kind == EntryKind::kBundledTrainer &&
      round.base_global_rank == 0) {
    trainer_metrics_path_ = attempt_dir + "/trainer_metrics.jsonl";
    launches.front().env[kAgentMetricsVariable] = trainer_metrics_path_;
  }
  live_control_path_.clear();
  if (config_.workers.live_recovery) {
    live_control_path_ = attempt_dir + "/live_control";
    write_live_control(live_control_path_, live_control_running(round));
    live_reports_.watch(live_control_path_);
    const auto& settings = config_.rendezvous.settings;
    // How long a worker waits for the next world once its collectives broke: the loss must be
    // noticed (the heartbeats) and a round formed (the join timeout).
    const double wait = settings.join_timeout.count() +
                        settings.keep_alive_interval.count() * settings.keep_alive_max_attempt +
                        settings.heartbeat_timeout.count();
    for (auto& launch : launches) {
      launch.env[kLiveControlVariable] = live_control_path_;
      launch.env["DDPRUN_LIVE_WAIT_SECONDS"] = std::to_string(static_cast<int>(wait) + 1);
    }
  }
  // Before the spawn: the workers' env names the FIFO and heartbeat descriptor.
  watchdog_.prepare_group(launches, attempt_dir);
  return launches;
}

std::vector<WorkerLaunch> AgentLoop::plan_launches(const RoundInfo& round,
                                                   const std::string& attempt_dir) const {
  std::vector<WorkerLaunch> launches;
  for (int local_rank = 0; local_rank < config_.rendezvous.shape.nproc_per_node; ++local_rank) {
    WorkerLaunch launch;
    launch.local_rank = local_rank;
    launch.global_rank = round.base_global_rank + local_rank;
    launch.argv = config_.workers.argv;
    launch.logs = plan_worker_logs(config_.logs, attempt_dir, local_rank);
    launch.env = build_worker_env(config_.workers, config_.rendezvous.shape, round,
                                  {inherited_env_, local_rank, launch.logs.error_file});
    launch.console_prefix = expand_prefix_template(
        prefix_template_, {config_.workers.role, launch.global_rank, local_rank, host_});
    if (static_cast<std::size_t>(local_rank) < config_.workers.numa_cpus.size())
      launch.cpu_affinity = config_.workers.numa_cpus[static_cast<std::size_t>(local_rank)];
    launches.push_back(std::move(launch));
  }
  return launches;
}

void AgentLoop::start_workers(const RoundInfo& round) {
  if (parked_ && resume_parked_workers(round)) {
    return;
  }
  parked_ = false;
  pump_fds_.clear();
  group_.reset();
  watchdog_.group_gone();
  round_ = round;
  outcome_reported_ = false;
  stopping_ = Stopping::kNo;
  gathering_since_.reset();
  events_.record("round_formed", round);
  try {
    group_.emplace(plan_workers(round), signals_.original_mask(),
                   steady(config_.supervision.reap_after_kill_limit));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: cannot start the workers: %s\n", error.what());
    WorkerFailure failure;
    failure.timestamp = round::unix_time(unix_time_now());
    failure.host = host_;
    failure.global_rank = round.base_global_rank;
    failure.local_rank = 0;
    failure.exit_code = 1;
    failure.message = std::string("cannot start the workers: ") + error.what();
    outcome_reported_ = true;
    watchdog_.group_gone();
    report_local_failures({failure});
    rendezvous_->driver().feed(round::WorkersFailed{{failure}});
    return;
  }
  record_workers_event("workers_started", round);
  beats_by_local_rank_.clear();
  round_timings_.workers_started(RoundTimings::Clock::now());
  ++rounds_started_;
  watchdog_.group_started(group_->workers());
  round_hooks_started(round);
  for (std::size_t i = 0; i < group_->output_pumps().size(); ++i) {
    OutputPump& pump = group_->output_pumps()[i];
    pump_fds_.push_back(
        pump.open() ? std::make_unique<boost::asio::posix::stream_descriptor>(io_, ::dup(pump.fd()))
                    : nullptr);
    watch_pump(i);
  }
  report_health();
  // Workers that exited before the loop looked are reaped on their SIGCHLD, already pending.
}

// The round and its workers' pids, under `name` (workers_started, workers_resumed).
void AgentLoop::record_workers_event(const char* name, const RoundInfo& round) {
  nlohmann::json fields = round;
  nlohmann::json pids = nlohmann::json::array();
  for (const auto& worker : group_->workers())
    pids.push_back(worker.pid);
  fields["pids"] = pids;
  events_.record(name, fields);
}

// What follows the round's workers (stacks on demand, the job page, stragglers) learns of it.
void AgentLoop::round_hooks_started(const RoundInfo& round) {
  std::vector<int> ranks;
  for (const auto& worker : group_->workers())
    ranks.push_back(worker.global_rank);
  stacks_on_demand_->round_started(round, std::move(ranks));
  if (job_view_)
    job_view_->round_started(round);
  if (page_stacks_)
    page_stacks_->round_started(round);
  if (straggler_watch_) {
    std::vector<WatchedWorker> watched;
    for (const auto& worker : group_->workers())
      watched.push_back(WatchedWorker{worker.local_rank, worker.global_rank, worker.pid});
    straggler_watch_->round_started(round, watched);
  }
}

void AgentLoop::round_hooks_ended() {
  if (stacks_on_demand_)
    stacks_on_demand_->round_ended();
  if (job_view_)
    job_view_->round_ended();
  if (page_stacks_)
    page_stacks_->round_ended();
  if (straggler_watch_)
    straggler_watch_->round_ended();
}

namespace {

std::vector<LiveWorker> live_workers_of(const WorkerGroup& group, const std::string& control) {
  std::vector<LiveWorker> workers;
  for (const auto& worker : group.workers()) {
    workers.push_back({worker.local_rank, !worker.exit && !worker.abandoned,
                       worker_joined_live(control, worker.local_rank, worker.pid)});
  }
  return workers;
}

}  // namespace

bool AgentLoop::park_for_live_recovery() {
  if (!config_.workers.live_recovery || !group_ || live_control_path_.empty() || !round_) {
    return false;
  }
  const LiveKeepDecision decision = decide_live_keep(live_workers_of(*group_, live_control_path_));
  if (!decision.keep) {
    live_recovery_fallback(decision.reason);
    return false;
  }
  try {
    write_live_control(live_control_path_, live_control_reforming(round_->round));
  } catch (const std::exception& error) {
    live_recovery_fallback(error.what());
    return false;
  }
  parked_ = true;
  round_hooks_ended();
  events_.record("live_recovery_kept", {{"round", round_->round}});
  report_health();
  rendezvous_->driver().feed(round::WorkersStopped{});
  return true;
}

bool AgentLoop::resume_parked_workers(const RoundInfo& round) {
  parked_ = false;
  const LiveKeepDecision decision = decide_live_keep(live_workers_of(*group_, live_control_path_));
  if (!decision.keep) {
    live_recovery_fallback(decision.reason + " while the round re-formed");
    return false;
  }
  group_->renumber(round.base_global_rank);
  try {
    write_live_control(live_control_path_, live_control_running(round));
  } catch (const std::exception& error) {
    live_recovery_fallback(error.what());
    return false;
  }
  round_ = round;
  events_.record("round_formed", round);
  record_workers_event("workers_resumed", round);
  round_timings_.workers_started(RoundTimings::Clock::now());
  ++rounds_started_;
  round_hooks_started(round);
  report_health();
  return true;
}

void AgentLoop::live_recovery_fallback(const std::string& reason) {
  end_open_console_lines();
  std::fprintf(stderr,
               "ddprun: live recovery: %s; this node's workers restart (as --recovery restart)\n",
               reason.c_str());
  std::fflush(stderr);
  events_.record("live_recovery_fallback",
                 {{"round", round_ ? round_->round : 0}, {"reason", reason}});
}

std::vector<WorkerFailure> AgentLoop::local_failures() const {
  // Every failure here is of one moment (the group stopped at the first), so, as failures of one
  // torchrun monitor check, they share its time and the root cause among them is the lowest
  // rank; a worker's error file, when it has one, gives its own time.
  double window_start = 0;
  for (const auto& worker : group_->workers()) {
    if (worker.exit && !worker.exit->succeeded() && !worker.stopped_by_agent &&
        (window_start == 0 || worker.exit_time_s < window_start))
      window_start = worker.exit_time_s;
  }
  std::vector<WorkerFailure> failures;
  for (const auto& worker : group_->workers()) {
    if (!worker.exit || worker.exit->succeeded() || worker.stopped_by_agent)
      continue;
    WorkerFailure failure;
    failure.timestamp = round::unix_time(window_start);
    failure.host = host_;
    failure.global_rank = worker.global_rank;
    failure.local_rank = worker.local_rank;
    failure.exit_code = worker.exit->exit_code;
    failure.pid = worker.pid;
    failure.message = default_failure_message(*worker.exit, worker.pid);
    if (auto content = read_error_file(worker.error_file)) {
      failure.error_file = worker.error_file;
      failure.message = content->message;
      if (content->timestamp)
        failure.timestamp = *content->timestamp;
    }
    // A worker the watchdog killed: its story is the hang, not the signal.
    if (auto hang = watchdog_.hang_message(worker.pid))
      failure.message = *hang;
    failures.push_back(std::move(failure));
  }
  std::stable_sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) {
    return std::tie(a.timestamp, a.global_rank) < std::tie(b.timestamp, b.global_rank);
  });
  return failures;
}

void AgentLoop::end_open_console_lines() {
  if (group_) {
    group_->console().end_open_lines();  // a worker's partial line must not swallow ours
  }
}

void AgentLoop::report_local_failures(const std::vector<WorkerFailure>& failures) {
  end_open_console_lines();
  for (const auto& failure : failures) {
    const std::string how = failure.exit_code < 0
                                ? "killed by " + signal_name(-failure.exit_code)
                                : "exit code " + std::to_string(failure.exit_code);
    std::fprintf(stderr, "ddprun: worker rank %d (local_rank %d, pid %d) failed: %s\n",
                 failure.global_rank, failure.local_rank, failure.pid, how.c_str());
    events_.record("failure", failure_fields(failure));
  }
  std::fflush(stderr);
}

void AgentLoop::after_reap() {
  if (!group_ || parked_) {
    return;  // a parked worker that exits is seen when the next round starts
  }
  if (stopping_ != Stopping::kNo) {
    if (group_->all_reaped_or_abandoned())
      stopping_ == Stopping::kForRound ? workers_gone() : report_failures();
    return;
  }
  if (outcome_reported_) {
    return;
  }
  switch (group_->state()) {
    case GroupState::kRunning:
      return;
    case GroupState::kSucceeded:
      outcome_reported_ = true;
      events_.record("workers_succeeded", {{"round", round_ ? round_->round : 0}});
      rendezvous_->driver().feed(round::WorkersSucceeded{});
      return;
    case GroupState::kFailed:
      // The group stops soon after its first failure; a rank whose own exit says it failed
      // before the stop reached it is still a failure (WorkerGroup::reap), so the round hears
      // of every one once the group is down.
      gather_failures();
      return;
  }
}

void AgentLoop::gather_failures() {
  const WorkerClock::time_point now = WorkerClock::now();
  if (!gathering_since_)
    gathering_since_ = now;
  round_timings_.interrupted(RoundTimings::Clock::now());
  const FailureGathering gathering(group_->start_spread());
  const FailureGathering::Now facts{now - *gathering_since_, !group_->all_reaped_or_abandoned(),
                                    group_->any_running_worker_runnable()};
  if (gathering.stop_now(facts)) {
    // A round's stop held for peers' failures keeps its own signal and answer.
    if (stopping_ == Stopping::kForRound) {
      begin_stop(held_round_signal_, Stopping::kForRound);
    } else {
      begin_stop(SIGTERM, Stopping::kAfterFailure);
    }
    return;
  }
  gather_timer_.expires_after(gathering.look_again_after(facts));
  gather_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || !group_ || !gathering_since_ || outcome_reported_)
      return;
    gather_failures();
  });
}

void AgentLoop::report_failures() {
  outcome_reported_ = true;
  stopping_ = Stopping::kNo;
  kill_timer_.cancel();
  reap_timer_.cancel();
  round_timings_.workers_gone(RoundTimings::Clock::now());
  std::vector<WorkerFailure> failures = local_failures();
  report_local_failures(failures);
  rendezvous_->driver().feed(round::WorkersFailed{std::move(failures)});
}

void AgentLoop::stop_workers(const round::StopWorkers& stop) {
  round_timings_.interrupted(RoundTimings::Clock::now());
  if (stop.membership_change && park_for_live_recovery()) {
    return;
  }
  if (!group_ || group_->all_reaped_or_abandoned()) {
    workers_gone();
    return;
  }
  if (!stop.peers_failed) {
    begin_stop(stop.signal, Stopping::kForRound);
    return;
  }
  // Workers failed on another node: ranks here often fail with them a moment later (the same
  // collective broke). The signal waits as for a local failure, so that those are listed with
  // their own exits; WorkersStopped carries them.
  stopping_ = Stopping::kForRound;
  held_round_signal_ = stop.signal;
  gather_failures();
}

void AgentLoop::begin_stop(int signal, Stopping why) {
  stopping_ = why;
  gather_timer_.cancel();
  gathering_since_.reset();
  watchdog_.stop_watching();
  round_hooks_ended();
  // The same signal first (a trainer snapshots on SIGTERM), SIGKILL after the timeout.
  group_->signal_all(signal);
  kill_timer_.expires_after(steady(config_.supervision.shutdown_timeout));
  kill_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || !group_ || stopping_ == Stopping::kNo) {
      return;
    }
    group_->kill_all();
    wait_for_killed_workers();
  });
  after_reap();  // signal_all reaped: maybe every worker is gone already
}

void AgentLoop::wait_for_killed_workers() {
  const auto deadline = group_->next_stuck_deadline();
  if (!deadline) {
    return;  // every worker was reaped already
  }
  reap_timer_.expires_at(*deadline);
  reap_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || !group_ || stopping_ == Stopping::kNo) {
      return;
    }
    abandon_stuck_workers();
    if (group_->all_reaped_or_abandoned()) {
      after_reap();
    } else {
      wait_for_killed_workers();
    }
  });
}

void AgentLoop::abandon_stuck_workers() {
  const std::vector<AbandonedWorker> stuck = group_->abandon_stuck(WorkerGroup::Clock::now());
  if (stuck.empty()) {
    return;
  }
  end_open_console_lines();
  for (const auto& worker : stuck) {
    std::fprintf(stderr, "%s\n", abandoned_worker_message(worker).c_str());
    events_.record("worker_abandoned", {{"rank", worker.global_rank},
                                        {"local_rank", worker.local_rank},
                                        {"pid", worker.pid},
                                        {"seconds_since_kill", worker.since_kill.count()},
                                        {"state", worker.state}});
    abandoned_pids_.push_back(worker.pid);
  }
  std::fflush(stderr);
  report_health();
}

void AgentLoop::workers_gone() {
  gather_timer_.cancel();
  gathering_since_.reset();
  kill_timer_.cancel();
  reap_timer_.cancel();
  round::WorkersStopped stopped;
  if (group_) {
    group_->kill_all();  // grandchildren left in the workers' process groups go too
    // Those that failed on their own before the stop reached them are failures all the same
    // (unless WorkersFailed told the round of them already).
    if (!outcome_reported_) {
      stopped.failures = local_failures();
      report_local_failures(stopped.failures);
    }
  }
  pump_fds_.clear();
  group_.reset();
  watchdog_.group_gone();
  round_hooks_ended();
  stopping_ = Stopping::kNo;
  round_timings_.workers_gone(RoundTimings::Clock::now());
  report_health();
  rendezvous_->driver().feed(std::move(stopped));
}

void AgentLoop::notice(const round::Notice& notice) {
  end_open_console_lines();
  std::fprintf(stderr, "ddprun: %s\n", notice.text.c_str());
  std::fflush(stderr);
  static constexpr const char* kRecorded[] = {"restart", "membership_change", "node_lost",
                                              "signal",  "node_check_failed", "collective_broke"};
  if (std::find(std::begin(kRecorded), std::end(kRecorded), notice.kind) != std::end(kRecorded)) {
    events_.record(notice.kind, {{"round", notice.round}, {"message", notice.text}});
  }
}

void AgentLoop::write_agent_error_file(const std::vector<WorkerFailure>& failures) const {
  // torchrun's @record on main: the scheduler above may have given the agent its own file.
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0' || failures.empty())
    return;
  const WorkerFailure& root = failures.front();
  std::string worker_json;
  if (!root.error_file.empty()) {
    worker_json = read_text_file(root.error_file, 1 << 20).value_or("");
  }
  write_text_file(path,
                  agent_error_file_json(worker_json, root.message, root.timestamp, root.exit_code));
}

void AgentLoop::hang_detected(const std::string& report) {
  // A hang needs running workers, so the round runs: its rendezvous exists.
  if (rendezvous_) {
    rendezvous_->driver().feed(round::HangDetected{report});
  } else {
    watchdog_.peers_captured();
  }
}

void AgentLoop::stacks_captured() {
  if (rendezvous_) {
    rendezvous_->driver().feed(round::StacksCaptured{});
  }
}

void AgentLoop::capture_stacks(const round::CaptureStacks& /*request*/) {
  watchdog_.capture_for_peer();
}

void AgentLoop::peers_captured_stacks() {
  watchdog_.peers_captured();
}

void AgentLoop::check_node(const round::CheckNode& /*request*/) {
  node_checks_->start();
}

bool AgentLoop::start_health_server() {
  if (!config_.health_port.port) {
    return true;
  }
  const std::string token = job_page_token(config_.rendezvous.secret);
  try {
    health_server_.emplace(
        config_.health_port.host, *config_.health_port.port, config_.health_port.stale_after,
        health_board_,
        JobPageOptions{token, !token.empty() || config_.health_port.page_stacks_without_secret});
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());
    events_.record("exit", {{"exit_code", round::kExitFailure}, {"reason", error.what()}});
    return false;
  }
  events_.observe([this](const std::string& line) {
    health_board_.add_event(line.ends_with('\n') ? line.substr(0, line.size() - 1) : line);
  });
  std::fprintf(stderr, "ddprun: job page: http://%s:%u/job/%s\n", host_.c_str(),
               static_cast<unsigned>(health_server_->port()),
               token.empty() ? "" : ("?token=" + token).c_str());
  report_health();
  tick_health();
  return true;
}

void AgentLoop::report_health() {
  if (!health_server_) {
    return;
  }
  // The charts' series only while someone looks at the job page.
  health_board_.publish(health_state(
      health_board_.viewed_within(JobViewExchange::kViewLease, HealthBoard::Clock::now())));
}

HealthState AgentLoop::health_state(bool with_series) {
  HealthState state;
  if (!job_facts_)
    job_facts_ = job_facts();  // fixed for the agent's life: built once
  state.job = *job_facts_;
  state.trainer_metrics_path = trainer_metrics_path_;
  state.node_check = node_check_result_;
  if (round_) {
    state.round = round_->round;
    state.restarts = round_->restart_count;
    state.group_rank = round_->group_rank;
    state.group_world_size = round_->group_world_size;
    state.world_size = round_->world_size;
  }
  state.max_restarts = config_.rendezvous.shape.max_restarts;
  state.rounds_started = rounds_started_;
  state.rendezvous = round_timings_.rendezvous();
  state.restart = round_timings_.restart();
  const auto intervals =
      straggler_watch_ ? straggler_watch_->step_intervals() : std::map<int, double>{};
  const auto series = straggler_watch_ && with_series
                          ? straggler_watch_->step_series(kStepSeriesPoints)
                          : std::map<int, std::vector<std::optional<double>>>{};
  if (group_) {
    for (const auto& worker : group_->workers()) {
      WorkerHealth& health = state.workers[worker.local_rank];
      health.state = worker_health(worker, stopping_ != Stopping::kNo);
      health.global_rank = worker.global_rank;
      health.pid = worker.pid;
      if (const auto beats = beats_by_local_rank_.find(worker.local_rank);
          beats != beats_by_local_rank_.end())
        health.steps = beats->second;
      if (const auto it = intervals.find(worker.global_rank); it != intervals.end())
        health.step_interval_s = it->second;
      if (const auto it = series.find(worker.global_rank); it != series.end())
        health.step_series = it->second;
    }
  }
  if (straggler_watch_)
    state.stragglers = straggler_watch_->stragglers();
  if (job_view_ && round_ && round_->group_rank != 0)
    state.page_location = job_view_->page_location();
  return state;
}

JobFacts AgentLoop::job_facts() const {
  JobFacts job;
  job.run_id = config_.rendezvous.run_id;
  switch (config_.rendezvous.backend) {
    case RendezvousBackend::c10d:
      job.backend = "c10d";
      break;
    case RendezvousBackend::static_store:
      job.backend = "static";
      break;
    case RendezvousBackend::etcd:
      job.backend = "etcd";
      break;
  }
  job.host = host_;
  job.min_nodes = config_.rendezvous.min_nodes;
  job.max_nodes = config_.rendezvous.max_nodes;
  job.nproc_per_node = config_.rendezvous.shape.nproc_per_node;
  return job;
}

void AgentLoop::tick_health() {
  health_timer_.expires_after(
      steady(std::min(kHealthTickLimit, config_.health_port.stale_after / 3)));
  health_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || exit_status_) {
      return;
    }
    report_health();
    if (job_view_)
      job_view_->tick(JobViewExchange::Clock::now());
    if (page_stacks_)
      page_stacks_->tick();
    tick_health();
  });
}

void AgentLoop::finished(const round::Finish& finish) {
  end_open_console_lines();
  round_hooks_ended();  // stacks on demand: its wait must not hold up the backend's close
  if (!finish.failures.empty() && finish.exit_status == round::kExitFailure) {
    std::fputs(format_failure_summary(failure_title_name(config_.workers), finish.failures).c_str(),
               stderr);
    write_agent_error_file(finish.failures);
  } else if (finish.exit_status == round::kExitFailure) {
    std::fprintf(stderr, "ddprun: %s\n", finish.reason.c_str());
  }
  std::fflush(stderr);
  events_.record("exit", {{"exit_code", finish.exit_status}, {"reason", finish.reason}});
  exit_status_ = finish.exit_status;
  if (config_.rendezvous.backend != RendezvousBackend::etcd || !rendezvous_) {
    io_.stop();
    return;
  }
  // Revoke this agent's etcd lease, so its beat keys vanish now rather than a TTL later (peers
  // that still run see the departure at once); bounded, since etcd may be what failed.
  close_timer_.expires_after(steady(kBackendCloseLimit));
  close_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) {
      io_.stop();
    }
  });
  rendezvous_->driver().backend().close([this] { io_.stop(); });
}

}  // namespace ddprun::agent
