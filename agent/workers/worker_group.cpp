#include "agent/workers/worker_group.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "agent/workers/process_state.hpp"
#include "agent/workers/worker_process.hpp"

namespace ddprun::agent {

namespace {

OwnedFd open_file(const std::string& path, int flags) {
  OwnedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644));
  if (!fd)
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

// What the child's stream is connected to (empty: the agent's own, inherited), and for a
// tee'd stream the pipe end and log file the pump keeps.
struct StreamWiring {
  OwnedFd child_end;
  OwnedFd pump_read_end;
  OwnedFd pump_file;
};

StreamWiring wire_stream(const StreamPlan& plan) {
  StreamWiring wiring;
  switch (plan.route) {
    case StreamRoute::kInherit:
      break;
    case StreamRoute::kDiscard:
      wiring.child_end = open_file("/dev/null", 0);
      break;
    case StreamRoute::kFile:
      wiring.child_end = open_file(plan.file, O_TRUNC);
      break;
    case StreamRoute::kTee: {
      int ends[2];
      if (::pipe2(ends, O_CLOEXEC) != 0) {
        throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
      }
      wiring.pump_read_end = OwnedFd(ends[0]);
      wiring.child_end = OwnedFd(ends[1]);
      wiring.pump_file = open_file(plan.file, O_TRUNC);
      break;
    }
  }
  return wiring;
}

}  // namespace

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void reap_quietly(std::vector<pid_t>& pids) {
  std::erase_if(pids, [](pid_t pid) {
    int status = 0;
    const pid_t rc = ::waitpid(pid, &status, WNOHANG);
    return rc == pid || (rc < 0 && errno == ECHILD);
  });
}

WorkerGroup::WorkerGroup(const std::vector<WorkerLaunch>& launches, const sigset_t& child_mask,
                         Clock::duration reap_after_kill_limit)
    : console_(std::make_unique<Console>()), reap_after_kill_limit_(reap_after_kill_limit) {
  workers_.reserve(launches.size());
  pumps_.reserve(launches.size() * 2);
  try {
    for (const auto& launch : launches)
      start_worker(launch, child_mask);
  } catch (...) {
    kill_and_reap_bounded();
    throw;
  }
}

int WorkerGroup::duplicate_fd(const std::string& path) {
  for (const auto& [open_path, fd] : duplicate_files_) {
    if (open_path == path)
      return fd.get();
  }
  // Truncated once per attempt, as torchrun's open(..., "w"); appended to by every rank.
  duplicate_files_.emplace_back(path, open_file(path, O_TRUNC | O_APPEND));
  return duplicate_files_.back().second.get();
}

void WorkerGroup::start_worker(const WorkerLaunch& launch, const sigset_t& child_mask) {
  StreamWiring out = wire_stream(launch.logs.out);
  StreamWiring err = wire_stream(launch.logs.err);
  WorkerCommand command{launch.argv,         launch.env,          out.child_end.get(),
                        err.child_end.get(), launch.cpu_affinity, launch.heartbeat_fd};
  WorkerRecord record;
  record.local_rank = launch.local_rank;
  record.global_rank = launch.global_rank;
  record.error_file = launch.logs.error_file;
  record.started_at = Clock::now();
  record.pid = spawn_worker(command, child_mask);
  workers_.push_back(std::move(record));
  const auto add_pump = [&](StreamWiring& wiring, const StreamPlan& plan, ConsoleStream stream) {
    if (!wiring.pump_read_end)
      return;
    PumpConsole console{console_.get(), console_->add_writer(stream, launch.console_prefix)};
    PumpDuplicate duplicate;
    if (!plan.duplicate_file.empty()) {
      duplicate.fd = duplicate_fd(plan.duplicate_file);
      duplicate.needles = plan.duplicate_filters;
      duplicate.prefix = launch.console_prefix;
    }
    pumps_.emplace_back(std::move(wiring.pump_read_end), console, std::move(wiring.pump_file),
                        std::move(duplicate));
    pump_worker_.push_back(workers_.size() - 1);
  };
  add_pump(out, launch.logs.out, ConsoleStream::kOut);
  add_pump(err, launch.logs.err, ConsoleStream::kErr);
  // The child ends close here: the worker holds the only write ends, so EOF means it is gone.
}

WorkerGroup::~WorkerGroup() {
  if (!all_reaped_or_abandoned())
    kill_and_reap_bounded();
  finish_output_if_done();
}

bool WorkerGroup::all_reaped_or_abandoned() const {
  return std::all_of(workers_.begin(), workers_.end(),
                     [](const WorkerRecord& worker) { return worker.exit || worker.abandoned; });
}

WorkerGroup::Clock::duration WorkerGroup::start_spread() const {
  if (workers_.empty())
    return {};
  return workers_.back().started_at - workers_.front().started_at;
}

bool WorkerGroup::any_running_worker_runnable() const {
  return std::any_of(workers_.begin(), workers_.end(), [](const WorkerRecord& worker) {
    return !worker.exit && !worker.abandoned && has_runnable_thread(worker.pid);
  });
}

GroupState WorkerGroup::state() const {
  std::vector<std::optional<WorkerExit>> exits;
  exits.reserve(workers_.size());
  for (const auto& worker : workers_)
    exits.push_back(worker.exit);
  return group_state(exits);
}

void WorkerGroup::reap() {
  for (std::size_t index = 0; index < workers_.size(); ++index) {
    WorkerRecord& worker = workers_[index];
    // An abandoned worker's exit, should it ever come, is the run loop's to collect quietly.
    if (worker.exit || worker.abandoned)
      continue;
    int status = 0;
    pid_t rc = ::waitpid(worker.pid, &status, WNOHANG);
    if (rc == worker.pid) {
      worker.exit = worker_exit_from_wait_status(status);
      worker.exit_time_s = unix_time_now();
      worker.stopped_by_agent = stopping_ && ended_by_stop(*worker.exit);
      // Its last words were written before it exited: they are in the pipe now.
      for (std::size_t pump = 0; pump < pumps_.size(); ++pump) {
        if (pump_worker_[pump] == index)
          pumps_[pump].on_readable();
      }
    } else if (rc < 0 && errno == ECHILD) {
      worker.exit = WorkerExit{-SIGKILL};  // reaped elsewhere: treat as lost
      worker.exit_time_s = unix_time_now();
      worker.stopped_by_agent = stopping_;
    }
  }
  finish_output_if_done();
}

void WorkerGroup::finish_output_if_done() {
  if (output_finished_ || !all_reaped_or_abandoned())
    return;
  for (auto& pump : pumps_)
    pump.finish();
  output_finished_ = true;
}

void WorkerGroup::signal_all(int sig) {
  reap();  // before stopping_: a worker that exited already did so on its own
  stopping_ = true;
  stop_signal_ = sig;
  for (const auto& worker : workers_) {
    if (!worker.exit && !worker.abandoned)
      signal_worker_group(worker.pid, sig);
  }
}

bool WorkerGroup::ended_by_stop(const WorkerExit& exit) const {
  return exit.succeeded() || exit.exit_code == -stop_signal_ || exit.exit_code == -SIGKILL ||
         exit.exit_code == 128 + stop_signal_;
}

void WorkerGroup::kill_all() {
  stopping_ = true;
  const Clock::time_point now = Clock::now();
  // Group only for exited workers: a reaped worker's pid may already belong to somebody else.
  for (auto& worker : workers_) {
    if (worker.abandoned)
      continue;
    if (worker.exit) {
      ::killpg(worker.pid, SIGKILL);
      continue;
    }
    signal_worker_group(worker.pid, SIGKILL);
    if (!worker.killed_at)
      worker.killed_at = now;
  }
}

std::optional<WorkerGroup::Clock::time_point> WorkerGroup::next_stuck_deadline() const {
  return agent::next_stuck_deadline(workers_, reap_after_kill_limit_);
}

std::vector<AbandonedWorker> WorkerGroup::abandon_stuck(Clock::time_point now) {
  std::vector<AbandonedWorker> abandoned;
  for (auto& worker : workers_) {
    if (!stuck_after_kill(worker, now, reap_after_kill_limit_))
      continue;
    worker.abandoned = true;
    abandoned.push_back({worker.local_rank, worker.global_rank, worker.pid, now - *worker.killed_at,
                         process_state(worker.pid).value_or("unknown")});
  }
  finish_output_if_done();
  return abandoned;
}

void WorkerGroup::kill_and_reap_bounded() {
  kill_all();
  // SIGKILLed workers die at once unless stuck in uninterruptible sleep (NCCL, RDMA): wait on
  // their pidfds until the next one's reap wait ends, so the agent never hangs on one. Each
  // round reaps a worker or abandons one.
  while (const auto deadline = next_stuck_deadline()) {
    std::vector<OwnedFd> pidfds;
    std::vector<pollfd> exits;
    for (const auto& worker : workers_) {
      if (!waited_for_after_kill(worker))
        continue;
      pidfds.emplace_back(static_cast<int>(::syscall(SYS_pidfd_open, worker.pid, 0)));
      exits.push_back({pidfds.back().get(), POLLIN, 0});  // poll ignores a failed (negative) one
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
    if (left.count() > 0)
      ::poll(exits.data(), exits.size(), static_cast<int>(left.count()));
    reap();
    for (const auto& worker : abandon_stuck(Clock::now()))
      std::fprintf(stderr, "%s\n", abandoned_worker_message(worker).c_str());
  }
}

void WorkerGroup::renumber(int base_global_rank) {
  for (auto& worker : workers_) {
    worker.global_rank = base_global_rank + worker.local_rank;
  }
}

}  // namespace ddprun::agent
