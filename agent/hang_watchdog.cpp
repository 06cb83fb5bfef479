#include "agent/hang_watchdog.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "agent/file_timer_setup.hpp"
#include "agent/stack_capture_plan.hpp"
#include "agent/stack_capture_probe.hpp"
#include "agent/worker_exit.hpp"
#include "agent/worker_process.hpp"

namespace ddprun::agent {

namespace {

using Descriptor = boost::asio::posix::stream_descriptor;
using SteadyClock = std::chrono::steady_clock;

std::unique_ptr<Descriptor> wait_on(boost::asio::io_context& io, int fd) {
  // A duplicate: the descriptor object closes its own, the owner keeps the original.
  const int copy = ::dup(fd);
  if (copy < 0)
    throw std::runtime_error("dup failed while setting up the hang watchdog");
  return std::make_unique<Descriptor>(io, copy);
}

template <class Duration>
SteadyClock::duration to_steady(Duration duration) {
  return std::max(SteadyClock::duration::zero(),
                  std::chrono::duration_cast<SteadyClock::duration>(duration));
}

// Where py-spy is looked for first: the bin/ of the worker's interpreter, as its command names
// it (a venv's py-spy sits next to its python).
std::vector<std::string> python_bin_dirs(const launcher::LaunchConfig& config, const EnvMap& env) {
  if (config.worker_argv.empty())
    return {};
  const std::string program = resolve_program(config.worker_argv.front(), env);
  if (program.find('/') == std::string::npos)
    return {};
  return {std::filesystem::path(program).parent_path().string()};
}

std::string tool_name(const CaptureCommand& command) {
  return command.argv.empty() ? "?"
                              : std::filesystem::path(command.argv.front()).filename().string();
}

// "py-spy: ok, eu-stack: exit 1": what each tool did, so a report without frames says why.
std::string capture_outcome(const StackCaptureRunner::TargetResult& result) {
  if (result.commands.empty())
    return "no stack tool found (py-spy, eu-stack or gdb)";
  std::string text;
  for (const auto& command : result.commands) {
    std::string how;
    switch (command.end) {
      case StackCaptureRunner::CommandEnd::kPending:
        how = "not finished";
        break;
      case StackCaptureRunner::CommandEnd::kExited:
        if (command.succeeded())
          how = "ok";
        else if (WIFEXITED(command.wait_status))
          how = "failed (exit " + std::to_string(WEXITSTATUS(command.wait_status)) + ")";
        else
          how = "failed (" + signal_name(WTERMSIG(command.wait_status)) + ")";
        break;
      case StackCaptureRunner::CommandEnd::kTimedOut:
        how = "timed out";
        break;
      case StackCaptureRunner::CommandEnd::kNotStarted:
        how = "not started: " + command.error;
        break;
      case StackCaptureRunner::CommandEnd::kCancelled:
        how = "cancelled (capture limit)";
        break;
    }
    text += (text.empty() ? "" : ", ") + tool_name(command.command) + " " + how;
  }
  return text;
}

std::string one_line(const HungRank& rank, const std::string& outcome) {
  std::string line = "ddprun: rank " + std::to_string(rank.worker.global_rank) + " (local_rank " +
                     std::to_string(rank.worker.local_rank) + ", pid " +
                     std::to_string(rank.worker.pid) + ") hung: " + describe_hang_cause(rank);
  if (rank.top_frames.empty()) {
    line += "; stuck at: <no stack captured>";
  } else {
    line += "; stuck at: ";
    for (std::size_t i = 0; i < rank.top_frames.size(); ++i) {
      const StackFrame& frame = rank.top_frames[i];
      line += (i == 0 ? "" : " < ") + frame.function +
              (frame.location.empty() ? "" : " (" + frame.location + ")");
    }
  }
  if (!rank.stack_file.empty())
    line += "; stacks: " + rank.stack_file;
  if (!outcome.empty())
    line += " [" + outcome + "]";
  return line;
}

}  // namespace

HangWatchdog::HangWatchdog(boost::asio::io_context& io, const launcher::LaunchConfig& config,
                           const EnvMap& agent_env, EventLog& events, std::string host,
                           std::function<void()> before_print, RoundHooks round)
    : io_(io),
      config_(config),
      agent_env_(agent_env),
      events_(events),
      host_(std::move(host)),
      before_print_(std::move(before_print)),
      round_(std::move(round)),
      tools_(locate_stack_tools(agent_env, python_bin_dirs(config, agent_env))),
      // The bundled trainer is LibTorch without Python: py-spy could only fail on it.
      python_stacks_(config.entry_kind != launcher::EntryKind::kBundledTrainer),
      timer_deadline_(io),
      progress_deadline_(io),
      runner_deadline_(io),
      capture_limit_(io) {}

HangWatchdog::~HangWatchdog() {
  group_gone();
  if (!fallback_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove(fallback_dir_, ignored);  // only if nothing was written there
  }
}

void HangWatchdog::prepare_group(std::vector<WorkerLaunch>& launches,
                                 const std::string& attempt_dir) {
  group_gone();
  attempt_dir_ = attempt_dir;
  captures_ = 0;
  hang_messages_.clear();
  const FileTimerSetup setup =
      decide_file_timer_setup(agent_env_, default_file_timer_path(agent_env_));
  if (setup.serve)
    timer_server_.emplace(*setup.path);
  if (config_.watchdog_timeout_s) {
    progress_.emplace(std::chrono::milliseconds(
        std::max<long long>(1, static_cast<long long>(*config_.watchdog_timeout_s * 1000.0))));
  }
  for (WorkerLaunch& launch : launches) {
    add_file_timer_env(launch.env, setup);
    if (progress_) {
      auto beat = std::make_unique<Heartbeat>();
      beat->local_rank = launch.local_rank;
      HeartbeatChannel::add_to_env(launch.env);
      launch.heartbeat_fd = beat->channel.worker_end();
      heartbeats_.push_back(std::move(beat));
    }
  }
}

void HangWatchdog::group_started(const std::vector<WorkerRecord>& workers) {
  workers_.clear();
  for (const WorkerRecord& record : workers)
    workers_.push_back(WatchedWorker{record.local_rank, record.global_rank, record.pid});
  active_ = true;
  // The workers hold the only write ends now: the end of a pipe means its worker is gone.
  for (auto& beat : heartbeats_)
    beat->channel.close_worker_end();
  if (timer_server_) {
    timer_server_->watch(workers_);
    timer_fd_ = wait_on(io_, timer_server_->fd());
    watch_timer_fifo();
  }
  if (progress_) {
    progress_->start_group(workers_);
    for (std::size_t i = 0; i < heartbeats_.size(); ++i) {
      heartbeats_[i]->wait = wait_on(io_, heartbeats_[i]->channel.fd());
      watch_heartbeat(i);
    }
  }
  // Workers that exited before this point are reported by the next worker_exited().
}

void HangWatchdog::worker_exited(const std::vector<WorkerRecord>& workers) {
  for (const WorkerRecord& record : workers) {
    if (!record.exit || !live(record.pid))
      continue;
    std::erase_if(workers_, [&](const WatchedWorker& w) { return w.pid == record.pid; });
    if (timer_server_)
      timer_server_->forget_worker(record.pid);
    if (progress_)
      progress_->forget_worker(record.local_rank);
  }
  if (active_) {
    arm_timer_deadline();
    arm_progress_deadline();
  }
}

void HangWatchdog::stop_watching() {
  active_ = false;
  ++generation_;
  timer_deadline_.cancel();
  progress_deadline_.cancel();
  runner_deadline_.cancel();
  capture_limit_.cancel();
  runner_fd_.reset();
  runner_.reset();  // kills and reaps the tools still running
  capturing_.clear();
  queued_.clear();
  to_signal_.clear();
  peers_pending_ = false;  // the group stops: nothing is left to signal
  answer_round();
  timer_fd_.reset();
  for (auto& beat : heartbeats_)
    beat->wait.reset();  // a full pipe only makes the worker's write fail with EAGAIN
}

void HangWatchdog::group_gone() {
  stop_watching();
  timer_server_.reset();  // unlinks the FIFO
  heartbeats_.clear();
  progress_.reset();
  workers_.clear();
}

std::optional<std::string> HangWatchdog::hang_message(pid_t pid) const {
  auto it = hang_messages_.find(pid);
  if (it == hang_messages_.end())
    return std::nullopt;
  return it->second;
}

bool HangWatchdog::live(pid_t pid) const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [&](const WatchedWorker& w) { return w.pid == pid; });
}

// ---- torchrun's file timer ---------------------------------------------------------------------

void HangWatchdog::watch_timer_fifo() {
  timer_fd_->async_wait(Descriptor::wait_read,
                        [this, generation = generation_](const boost::system::error_code& error) {
                          if (error || generation != generation_ || !timer_server_)
                            return;
                          FileTimerServer::Events events =
                              timer_server_->on_readable(unix_time_now());
                          if (!events.warnings.empty()) {
                            before_print_();
                            for (const auto& warning : events.warnings)
                              std::fprintf(stderr, "ddprun: warning: %s\n", warning.c_str());
                            std::fflush(stderr);
                          }
                          std::vector<HungRank> hung;
                          for (const TimerExpiry& expiry : events.expired)
                            hung.push_back(hung_rank_from_timer(expiry));
                          watch_timer_fifo();
                          arm_timer_deadline();
                          if (!hung.empty())
                            on_hung(std::move(hung));
                        });
}

void HangWatchdog::arm_timer_deadline() {
  if (!timer_server_)
    return;
  const std::optional<double> deadline = timer_server_->next_deadline_epoch_s();
  timer_deadline_.cancel();
  if (!deadline)
    return;
  // The requests carry wall-clock times; the wait is on the steady clock from now.
  timer_deadline_.expires_after(
      to_steady(std::chrono::duration<double>(*deadline - unix_time_now())));
  timer_deadline_.async_wait(
      [this, generation = generation_](const boost::system::error_code& error) {
        if (error || generation != generation_ || !timer_server_)
          return;
        FileTimerServer::Events events = timer_server_->on_deadline(unix_time_now());
        std::vector<HungRank> hung;
        for (const TimerExpiry& expiry : events.expired)
          hung.push_back(hung_rank_from_timer(expiry));
        arm_timer_deadline();
        if (!hung.empty())
          on_hung(std::move(hung));
      });
}

// ---- --watchdog-timeout ------------------------------------------------------------------------

void HangWatchdog::watch_heartbeat(std::size_t index) {
  Heartbeat& beat = *heartbeats_[index];
  if (!beat.wait)
    return;
  beat.wait->async_wait(Descriptor::wait_read, [this, index, generation = generation_](
                                                   const boost::system::error_code& error) {
    if (error || generation != generation_ || !progress_ || index >= heartbeats_.size())
      return;
    Heartbeat& ready = *heartbeats_[index];
    const HeartbeatChannel::Drained drained = ready.channel.drain();
    if (drained.bytes > 0) {
      progress_->on_heartbeat(ready.local_rank, ProgressWatch::Clock::now());
      arm_progress_deadline();
    }
    if (drained.closed)
      ready.wait.reset();  // stays readable at end-of-file: stop waiting
    else
      watch_heartbeat(index);
  });
}

void HangWatchdog::arm_progress_deadline() {
  if (!progress_)
    return;
  const std::optional<ProgressWatch::TimePoint> deadline = progress_->next_deadline();
  progress_deadline_.cancel();
  if (!deadline)
    return;
  progress_deadline_.expires_at(*deadline);
  progress_deadline_.async_wait(
      [this, generation = generation_](const boost::system::error_code& error) {
        if (error || generation != generation_ || !progress_)
          return;
        std::vector<HungRank> hung;
        for (const HungWorker& worker : progress_->take_hung(ProgressWatch::Clock::now()))
          hung.push_back(hung_rank_from_silence(worker, progress_->timeout()));
        arm_progress_deadline();
        if (!hung.empty())
          on_hung(std::move(hung));
      });
}

// ---- a hang: stacks, report, signal ------------------------------------------------------------

void HangWatchdog::on_hung(std::vector<HungRank> ranks) {
  if (!active_)
    return;
  for (HungRank& rank : ranks) {
    if (live(rank.worker.pid))
      queued_.push_back(std::move(rank));
  }
  if (queued_.empty())
    return;
  if (!runner_)
    start_capture();
  else if (capturing_.empty())
    adopt_queued_hangs();  // a capture for another node's hang runs, of every local worker
}

// The queued hangs become the capture's, and the round hears of them first, so the other
// nodes capture while this one does.
void HangWatchdog::adopt_queued_hangs() {
  capturing_ = std::move(queued_);
  queued_.clear();
  if (capturing_.empty())
    return;
  std::string report = host_ + ":";
  for (const HungRank& rank : capturing_)
    report += " rank " + std::to_string(rank.worker.global_rank) + " " + describe_hang_cause(rank);
  peers_pending_ = true;
  round_waits_ = true;
  round_.hang_detected(report);
}

std::string HangWatchdog::stacks_dir_for_capture() {
  std::string base = attempt_dir_;
  if (base.empty()) {
    if (fallback_dir_.empty()) {
      std::string templ =
          (std::filesystem::temp_directory_path() / "ddprun_stacks_XXXXXX").string();
      if (::mkdtemp(templ.data()) == nullptr)
        throw std::runtime_error("cannot create a folder for the stacks in " +
                                 std::filesystem::temp_directory_path().string());
      fallback_dir_ = templ;
    }
    base = fallback_dir_;
  }
  ++captures_;
  return (std::filesystem::path(base) /
          (captures_ == 1 ? std::string("stacks") : "stacks_" + std::to_string(captures_)))
      .string();
}

void HangWatchdog::start_capture() {
  adopt_queued_hangs();
  std::vector<StackTarget> targets;
  for (const WatchedWorker& worker : workers_)
    targets.push_back(probe_stack_target(worker));
  StackCaptureOptions options;
  options.python = python_stacks_;
  options.tool_timeout = kHangCaptureToolTimeout;
  try {
    capture_dir_ = stacks_dir_for_capture();
    StackCapturePlan plan = plan_stack_capture(targets, attempt_dir_, tools_, options);
    // Every capture of this group gets its own folder; the planner names only "<dir>/stacks".
    plan.stacks_dir = capture_dir_;
    for (auto& target : plan.targets)
      target.output_path = (std::filesystem::path(capture_dir_) /
                            std::filesystem::path(target.output_path).filename())
                               .string();
    runner_ = std::make_unique<StackCaptureRunner>(plan, agent_env_, SteadyClock::now());
    runner_fd_ = wait_on(io_, runner_->fd());
  } catch (const std::exception& error) {
    before_print_();
    std::fprintf(stderr, "ddprun: warning: cannot capture the hung workers' stacks: %s\n",
                 error.what());
    std::fflush(stderr);
    runner_fd_.reset();
    runner_.reset();
    capture_dir_.clear();
    finish_capture();
    return;
  }
  capture_limit_.expires_after(kHangCaptureLimit);
  capture_limit_.async_wait(
      [this, generation = generation_](const boost::system::error_code& error) {
        if (error || generation != generation_ || !runner_)
          return;
        runner_->cancel();
        finish_capture();
      });
  watch_capture();
  advance_capture();  // a plan without commands is done at once
}

void HangWatchdog::watch_capture() {
  runner_fd_->async_wait(Descriptor::wait_read,
                         [this, generation = generation_](const boost::system::error_code& error) {
                           if (error || generation != generation_ || !runner_)
                             return;
                           advance_capture();
                           if (runner_)
                             watch_capture();
                         });
}

void HangWatchdog::advance_capture() {
  runner_->advance(SteadyClock::now());
  if (runner_->done()) {
    finish_capture();
    return;
  }
  runner_deadline_.cancel();
  if (const auto deadline = runner_->next_deadline()) {
    runner_deadline_.expires_at(*deadline);
    runner_deadline_.async_wait(
        [this, generation = generation_](const boost::system::error_code& error) {
          if (error || generation != generation_ || !runner_)
            return;
          advance_capture();
        });
  }
}

void HangWatchdog::finish_capture() {
  runner_deadline_.cancel();
  capture_limit_.cancel();
  std::vector<StackCaptureRunner::TargetResult> results;
  if (runner_)
    results = runner_->results();
  runner_fd_.reset();
  runner_.reset();

  if (capturing_.empty()) {
    // A capture for another node's hang: say where this node's stacks are.
    const std::string dir = results.empty() ? std::string() : capture_dir_;
    before_print_();
    std::fprintf(stderr, "ddprun: a worker hung on another node; this node's stacks: %s\n",
                 dir.empty() ? "not captured" : dir.c_str());
    std::fflush(stderr);
    events_.record("peer_stacks", {{"stacks_dir", dir}});
    answer_round();
    start_queued_capture();
    return;
  }
  HangReport report;
  report.host = host_;
  report.stacks_dir = results.empty() ? std::string() : capture_dir_;
  std::vector<std::string> outcomes;
  for (HungRank& rank : capturing_) {
    std::string outcome = results.empty() ? "stacks not captured" : "";
    for (const auto& result : results) {
      if (result.target.pid != rank.worker.pid)
        continue;
      attach_stacks(rank, read_captured_stacks(result), result.output_path);
      outcome = capture_outcome(result);
    }
    outcomes.push_back(std::move(outcome));
    report.hung.push_back(rank);
  }
  before_print_();
  for (std::size_t i = 0; i < report.hung.size(); ++i)
    std::fprintf(stderr, "%s\n", one_line(report.hung[i], outcomes[i]).c_str());
  std::fflush(stderr);
  events_.record("hang", hang_report_json(report));
  for (HungRank& rank : report.hung) {
    hang_messages_[rank.worker.pid] = format_hung_rank_message(rank);
    to_signal_.push_back(std::move(rank));
  }
  capturing_.clear();
  answer_round();  // every local worker's stacks were in this capture
  signal_hung_workers();
  start_queued_capture();
}

void HangWatchdog::start_queued_capture() {
  if (!active_ || (queued_.empty() && !round_waits_))
    return;
  // Later, from the loop: this may run inside a handler of the capture just finished.
  boost::asio::post(io_, [this, generation = generation_] {
    if (generation == generation_ && active_ && !runner_ && (!queued_.empty() || round_waits_))
      start_capture();
  });
}

void HangWatchdog::peers_captured() {
  peers_pending_ = false;
  signal_hung_workers();
}

void HangWatchdog::signal_hung_workers() {
  if (peers_pending_)
    return;
  std::vector<HungRank> ranks = std::move(to_signal_);
  to_signal_.clear();
  for (const HungRank& rank : ranks)
    act_on(rank);
}

void HangWatchdog::capture_for_peer() {
  round_waits_ = true;
  if (!active_ || workers_.empty()) {
    answer_round();
    return;
  }
  if (!runner_)
    start_queued_capture();  // from the loop: this call comes from inside the round's step
}

void HangWatchdog::answer_round() {
  if (!round_waits_)
    return;
  round_waits_ = false;
  boost::asio::post(io_, round_.stacks_captured);
}

void HangWatchdog::act_on(const HungRank& rank) {
  // Only a worker not yet reaped: its pid is still ours.
  if (!active_ || !live(rank.worker.pid))
    return;
  if (rank.cause == HangCause::kTimerExpired) {
    // As torchrun's server: the requested signal to the worker's pid; none asked, none sent.
    if (rank.signal > 0)
      ::kill(rank.worker.pid, rank.signal);
    return;
  }
  // A silent worker: its whole process group, so the group fails and restarts; SIGKILL also
  // ends a SIGSTOPped one.
  signal_worker_group(rank.worker.pid, SIGKILL);
}

}  // namespace ddprun::agent
