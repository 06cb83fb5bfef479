#include "agent/watchdog/hang/hang_responder.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "agent/stacks/faulthandler_parser.hpp"
#include "agent/stacks/stack_capture_plan.hpp"
#include "agent/stacks/stack_capture_probe.hpp"
#include "agent/watchdog/hang/python_traceback_fallback.hpp"
#include "agent/workers/worker_exit.hpp"
#include "agent/workers/worker_process.hpp"

namespace ddprun::agent {

namespace {

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

std::string one_line(const HungRank& rank, const std::string& outcome, const std::string& note) {
  std::string line = "ddprun: " + rank_title(rank.worker) + " hung: " + describe_hang_cause(rank);
  line += "; stuck at: " +
          (rank.top_frames.empty() ? "<no stack captured>" : frames_text(rank.top_frames));
  if (!rank.stack_file.empty())
    line += "; stacks: " + rank.stack_file;
  if (!outcome.empty())
    line += " [" + outcome + "]";
  if (!note.empty())
    line += "; " + note;
  return line;
}

// The last max_bytes of path ("" when it cannot be read): a log file may be large, and a dump
// is at its end.
std::string read_file_tail(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return {};
  const auto size = static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0));
  const std::size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string text(size - start, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return text;
}

}  // namespace

HangResponder::HangResponder(boost::asio::io_context& io, const EnvMap& agent_env, StackTools tools,
                             bool python_stacks, EventLog& events, std::string host,
                             std::function<void()> before_print, RoundHooks round)
    : io_(io),
      agent_env_(agent_env),
      tools_(std::move(tools)),
      python_stacks_(python_stacks),
      events_(events),
      host_(std::move(host)),
      before_print_(std::move(before_print)),
      round_(std::move(round)),
      capture_limit_(io),
      abort_limit_(io) {}

HangResponder::~HangResponder() {
  stop();
  if (!fallback_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove(fallback_dir_, ignored);  // only if nothing was written there
  }
}

void HangResponder::prepare_group(const std::string& attempt_dir) {
  stop();
  workers_.clear();
  attempt_dir_ = attempt_dir;
  captures_ = 0;
  hang_messages_.clear();
}

void HangResponder::group_started(std::vector<WatchedWorker> workers) {
  workers_ = std::move(workers);
  active_ = true;
}

void HangResponder::worker_exited(pid_t pid) {
  std::erase_if(workers_, [&](const WatchedWorker& w) { return w.pid == pid; });
  const auto aborted = std::find_if(aborted_.begin(), aborted_.end(),
                                    [&](const Aborted& a) { return a.rank.worker.pid == pid; });
  if (aborted == aborted_.end())
    return;
  const Aborted done = *aborted;
  aborted_.erase(aborted);
  if (aborted_.empty())
    abort_limit_.cancel();
  traceback_written(done.rank, done.worker);
}

const WatchedWorker* HangResponder::watched(pid_t pid) const {
  const auto it = std::find_if(workers_.begin(), workers_.end(),
                               [&](const WatchedWorker& w) { return w.pid == pid; });
  return it == workers_.end() ? nullptr : &*it;
}

bool HangResponder::live(pid_t pid) const {
  return watched(pid) != nullptr;
}

void HangResponder::stop() {
  active_ = false;
  ++generation_;
  capture_limit_.cancel();
  abort_limit_.cancel();
  aborted_.clear();  // the group's stop ends them
  capture_.reset();  // kills and reaps the tools still running
  capturing_.clear();
  queued_.clear();
  to_signal_.clear();
  peers_pending_ = false;  // the group stops: nothing is left to signal
  answer_round();
  answer_requests("");
}

std::optional<std::string> HangResponder::hang_message(pid_t pid) const {
  auto it = hang_messages_.find(pid);
  if (it == hang_messages_.end())
    return std::nullopt;
  return it->second;
}

void HangResponder::on_hung(std::vector<HungRank> ranks) {
  if (!active_)
    return;
  for (HungRank& rank : ranks) {
    if (live(rank.worker.pid))
      queued_.push_back(std::move(rank));
  }
  if (queued_.empty())
    return;
  if (!capture_)
    start_capture();
  else if (capturing_.empty())
    adopt_queued_hangs();  // a capture for another node's hang runs, of every local worker
}

// The queued hangs become the capture's, and the round hears of them first, so the other
// nodes capture while this one does.
void HangResponder::adopt_queued_hangs() {
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

std::string HangResponder::stacks_dir_for_capture() {
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

void HangResponder::start_capture() {
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
    capture_ = std::make_unique<CaptureRun>(
        io_, plan, agent_env_,
        [this](CaptureRun::Results results) { finish_capture(std::move(results)); });
  } catch (const std::exception& error) {
    before_print_();
    std::fprintf(stderr, "ddprun: warning: cannot capture the hung workers' stacks: %s\n",
                 error.what());
    std::fflush(stderr);
    capture_.reset();
    capture_dir_.clear();
    finish_capture({});
    return;
  }
  capture_limit_.expires_after(kHangCaptureLimit);
  capture_limit_.async_wait(
      [this, generation = generation_](const boost::system::error_code& error) {
        if (error || generation != generation_ || !capture_)
          return;
        capture_->cancel();  // finishes the capture with what it has
      });
  capture_->begin();  // a plan without commands is done at once
}

void HangResponder::finish_capture(CaptureRun::Results results) {
  capture_limit_.cancel();
  capture_.reset();  // finished: its tools have all ended

  if (capturing_.empty()) {
    // A capture for another node's hang, or asked for: say where this node's stacks are.
    const std::string dir = results.empty() ? std::string() : capture_dir_;
    if (round_waits_) {
      before_print_();
      std::fprintf(stderr, "ddprun: a worker hung on another node; this node's stacks: %s\n",
                   dir.empty() ? "not captured" : dir.c_str());
      std::fflush(stderr);
      events_.record("peer_stacks", {{"stacks_dir", dir}});
    }
    answer_round();
    answer_requests(dir);
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
  for (std::size_t i = 0; i < report.hung.size(); ++i) {
    const HungRank& rank = report.hung[i];
    std::string note;
    const WatchedWorker* worker = watched(rank.worker.pid);
    if (worker != nullptr && worker->python && python_stacks_ && !tools_.py_spy) {
      const bool aborting = abort_for_python_traceback(rank, *worker, tools_.py_spy.has_value(),
                                                       process_is_stopped(rank.worker.pid));
      note = py_spy_missing_note(*worker, aborting, rank.stack_file);
    }
    std::fprintf(stderr, "%s\n", one_line(rank, outcomes[i], note).c_str());
  }
  std::fflush(stderr);
  events_.record("hang", hang_report_json(report));
  for (HungRank& rank : report.hung) {
    hang_messages_[rank.worker.pid] = format_hung_rank_message(rank);
    to_signal_.push_back(std::move(rank));
  }
  capturing_.clear();
  answer_round();  // every local worker's stacks were in this capture
  answer_requests(report.stacks_dir);
  signal_hung_workers();
  start_queued_capture();
}

bool HangResponder::capture_wanted() const {
  return !queued_.empty() || round_waits_ || !requests_.empty();
}

void HangResponder::start_queued_capture() {
  if (!active_ || !capture_wanted())
    return;
  // Later, from the loop: this may run inside a handler of the capture just finished.
  boost::asio::post(io_, [this, generation = generation_] {
    if (generation == generation_ && active_ && !capture_ && capture_wanted())
      start_capture();
  });
}

void HangResponder::peers_captured() {
  peers_pending_ = false;
  signal_hung_workers();
}

void HangResponder::signal_hung_workers() {
  if (peers_pending_)
    return;
  std::vector<HungRank> ranks = std::move(to_signal_);
  to_signal_.clear();
  for (const HungRank& rank : ranks)
    act_on(rank);
}

void HangResponder::capture_for_peer() {
  round_waits_ = true;
  if (!active_ || workers_.empty()) {
    answer_round();
    return;
  }
  if (!capture_)
    start_queued_capture();  // from the loop: this call comes from inside the round's step
}

void HangResponder::capture_on_request(std::function<void(const std::string&)> done) {
  requests_.push_back(std::move(done));
  if (!active_ || workers_.empty()) {
    answer_requests("");
    return;
  }
  if (!capture_)
    start_queued_capture();
}

void HangResponder::answer_requests(const std::string& stacks_dir) {
  for (auto& done : std::exchange(requests_, {}))
    boost::asio::post(io_, [done = std::move(done), stacks_dir] { done(stacks_dir); });
}

void HangResponder::answer_round() {
  if (!round_waits_)
    return;
  round_waits_ = false;
  boost::asio::post(io_, round_.stacks_captured);
}

void HangResponder::act_on(const HungRank& rank) {
  // Only a worker not yet reaped: its pid is still ours.
  const WatchedWorker* worker = watched(rank.worker.pid);
  if (!active_ || worker == nullptr)
    return;
  if (abort_for_python_traceback(rank, *worker, tools_.py_spy.has_value(),
                                 process_is_stopped(rank.worker.pid))) {
    abort_for_traceback(rank, *worker);
    return;
  }
  kill_hung(rank);
}

void HangResponder::kill_hung(const HungRank& rank) {
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

void HangResponder::abort_for_traceback(const HungRank& rank, const WatchedWorker& worker) {
  // SIGABRT dumps core where RLIMIT_CORE allows: a hang's kill must leave no core file behind,
  // so the worker's soft limit goes to 0 first (its hard limit stays).
  rlimit no_core{};
  if (::prlimit(rank.worker.pid, RLIMIT_CORE, nullptr, &no_core) == 0) {
    no_core.rlim_cur = 0;
    ::prlimit(rank.worker.pid, RLIMIT_CORE, &no_core, nullptr);
  }
  if (::kill(rank.worker.pid, SIGABRT) != 0) {
    kill_hung(rank);
    return;
  }
  aborted_.push_back(Aborted{rank, worker});
  if (aborted_.size() > 1)
    return;  // the limit runs already: the hangs of one capture are signalled together
  abort_limit_.expires_after(kFaulthandlerExitLimit);
  abort_limit_.async_wait([this, generation = generation_](const boost::system::error_code& error) {
    if (!error && generation == generation_)
      abort_limit_passed();
  });
}

void HangResponder::abort_limit_passed() {
  std::vector<Aborted> late = std::move(aborted_);
  aborted_.clear();
  before_print_();
  for (const Aborted& entry : late) {
    std::fprintf(stderr,
                 "ddprun: %s did not end within %lld s of SIGABRT (no faulthandler traceback); "
                 "killing it\n",
                 rank_title(entry.rank.worker).c_str(),
                 static_cast<long long>(kFaulthandlerExitLimit.count()));
    if (live(entry.rank.worker.pid))
      kill_hung(entry.rank);
  }
  std::fflush(stderr);
}

void HangResponder::traceback_written(const HungRank& rank, const WatchedWorker& worker) {
  // Its process group may outlive it (its own children): a silent worker's group is killed as
  // SIGKILL would have. As WorkerGroup::kill_all, a group id stays reserved while members live.
  if (rank.cause == HangCause::kNoHeartbeat)
    ::killpg(rank.worker.pid, SIGKILL);
  const std::string tail = worker.stderr_file.empty()
                               ? std::string()
                               : read_file_tail(worker.stderr_file, kStderrTailBytes);
  const std::string_view dump = last_faulthandler_dump(tail, kFaulthandlerDumpBytes);
  std::vector<StackFrame> frames = parse_faulthandler_main_thread(dump);
  frames.resize(std::min(frames.size(), kHangReportFrames));
  if (!rank.stack_file.empty()) {
    std::ofstream out(rank.stack_file, std::ios::app);
    out << faulthandler_section(worker, dump);
  }
  std::string line = "ddprun: " + rank_title(rank.worker) + " Python stack (faulthandler): ";
  if (frames.empty()) {
    line += worker.stderr_file.empty() ? "written to " + traceback_destination(worker)
                                       : "none found in " + worker.stderr_file;
  } else {
    line += frames_text(frames);
    if (!rank.stack_file.empty())
      line += "; full traceback: " + rank.stack_file;
    // The failure table names the Python frames rather than the interpreter's C ones.
    HungRank with_python = rank;
    with_python.top_frames = frames;
    hang_messages_[rank.worker.pid] = format_hung_rank_message(with_python);
  }
  before_print_();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace ddprun::agent
