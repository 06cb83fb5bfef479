#include "agent/workers/worker_group.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "agent/workers/worker_process.hpp"

namespace ddprun::agent {

namespace {

// How long to wait for SIGKILLed workers to be reaped before giving up on them (a worker in
// uninterruptible sleep cannot be reaped; the agent must not hang on it).
constexpr std::chrono::seconds kReapAfterKillLimit{5};

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

WorkerGroup::WorkerGroup(const std::vector<WorkerLaunch>& launches, const sigset_t& child_mask)
    : console_(std::make_unique<Console>()) {
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
  if (!all_exited())
    kill_and_reap_bounded();
  finish_output_if_done();
}

bool WorkerGroup::all_exited() const {
  for (const auto& worker : workers_) {
    if (!worker.exit)
      return false;
  }
  return true;
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
    if (worker.exit)
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
  if (output_finished_ || !all_exited())
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
    if (!worker.exit)
      signal_worker_group(worker.pid, sig);
  }
}

bool WorkerGroup::ended_by_stop(const WorkerExit& exit) const {
  return exit.succeeded() || exit.exit_code == -stop_signal_ || exit.exit_code == -SIGKILL ||
         exit.exit_code == 128 + stop_signal_;
}

void WorkerGroup::kill_all() {
  stopping_ = true;
  // Group only for exited workers: a reaped worker's pid may already belong to somebody else.
  for (const auto& worker : workers_) {
    if (worker.exit)
      ::killpg(worker.pid, SIGKILL);
    else
      signal_worker_group(worker.pid, SIGKILL);
  }
}

void WorkerGroup::kill_and_reap_bounded() {
  kill_all();
  // SIGKILLed workers die at once unless stuck in uninterruptible sleep (NCCL, RDMA): wait for
  // each on its pidfd, up to a bound, so the agent never hangs on one.
  const auto deadline = Clock::now() + kReapAfterKillLimit;
  for (const auto& worker : workers_) {
    if (worker.exit)
      continue;
    OwnedFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, worker.pid, 0)));
    if (pidfd) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd exited{pidfd.get(), POLLIN, 0};
      ::poll(&exited, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    }
    reap();
  }
}

}  // namespace ddprun::agent
