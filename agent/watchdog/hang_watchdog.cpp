#include "agent/watchdog/hang_watchdog.hpp"

#include <filesystem>

#include "agent/stacks/stack_capture_probe.hpp"
#include "agent/workers/worker_process.hpp"

namespace ddprun::agent {

namespace {

// Where py-spy is looked for first: the bin/ of the worker's interpreter, as its command names
// it (a venv's py-spy sits next to its python).
std::vector<std::string> python_bin_dirs(const WorkerSpec& workers, const EnvMap& env) {
  if (workers.argv.empty())
    return {};
  const std::string program = resolve_program(workers.argv.front(), env);
  if (program.find('/') == std::string::npos)
    return {};
  return {std::filesystem::path(program).parent_path().string()};
}

}  // namespace

HangWatchdog::HangWatchdog(boost::asio::io_context& io, const WatchdogConfig& config,
                           const WorkerSpec& workers, const EnvMap& agent_env, EventLog& events,
                           std::string host, std::function<void()> before_print, RoundHooks round,
                           HeartbeatDriver::BeatObserver on_beats)
    : agent_env_(agent_env),
      python_entry_(workers.entry_kind == EntryKind::kPythonScript ||
                    workers.entry_kind == EntryKind::kPythonModule),
      heartbeat_on_(config.heartbeat_timeout.has_value()),
      responder_(io, agent_env, locate_stack_tools(agent_env, python_bin_dirs(workers, agent_env)),
                 // The bundled trainer is LibTorch without Python: py-spy could only fail on it.
                 workers.entry_kind != EntryKind::kBundledTrainer, events, std::move(host),
                 before_print, std::move(round)),
      file_timer_(io, before_print,
                  [this](std::vector<HungRank> ranks) { responder_.on_hung(std::move(ranks)); }),
      heartbeat_(
          io, config.heartbeat_timeout,
          [this](std::vector<HungRank> ranks) { responder_.on_hung(std::move(ranks)); },
          std::move(on_beats)) {}

void HangWatchdog::prepare_group(std::vector<WorkerLaunch>& launches,
                                 const std::string& attempt_dir) {
  group_gone();
  responder_.prepare_group(attempt_dir);
  file_timer_.prepare(launches, agent_env_);
  heartbeat_.prepare(launches);
  launched_.clear();
  const bool faulthandler_route =
      python_entry_ && responder_.lacks_py_spy() && (heartbeat_on_ || file_timer_.serving());
  for (WorkerLaunch& launch : launches) {
    if (faulthandler_route)
      launch.env.try_emplace("PYTHONFAULTHANDLER", "1");
    WatchedWorker& worker = launched_[launch.local_rank];
    worker.python = python_entry_;
    const auto faulthandler = launch.env.find("PYTHONFAULTHANDLER");
    // Python enables it for any non-empty value.
    worker.faulthandler =
        python_entry_ && faulthandler != launch.env.end() && !faulthandler->second.empty();
    const StreamPlan& err = launch.logs.err;
    if (err.route == StreamRoute::kFile || err.route == StreamRoute::kTee)
      worker.stderr_file = err.file;
    worker.stderr_discarded = err.route == StreamRoute::kDiscard;
  }
}

void HangWatchdog::group_started(const std::vector<WorkerRecord>& workers) {
  std::vector<WatchedWorker> watched;
  for (const WorkerRecord& record : workers) {
    WatchedWorker worker = launched_[record.local_rank];
    worker.local_rank = record.local_rank;
    worker.global_rank = record.global_rank;
    worker.pid = record.pid;
    watched.push_back(std::move(worker));
  }
  responder_.group_started(watched);
  file_timer_.start(watched);
  heartbeat_.start(watched);
  // Workers that exited before this point are reported by the next worker_exited().
}

void HangWatchdog::worker_exited(const std::vector<WorkerRecord>& workers) {
  for (const WorkerRecord& record : workers) {
    if (!record.exit || !responder_.live(record.pid))
      continue;
    responder_.worker_exited(record.pid);
    file_timer_.forget_worker(record.pid);
    heartbeat_.forget_worker(record.local_rank);
  }
}

void HangWatchdog::stop_watching() {
  file_timer_.stop();
  heartbeat_.stop();
  responder_.stop();
}

void HangWatchdog::group_gone() {
  stop_watching();
  file_timer_.reset();
  heartbeat_.reset();
}

}  // namespace ddprun::agent
