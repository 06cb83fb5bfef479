#include "agent/worker_group.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <stdexcept>

#include "agent/worker_process.hpp"

namespace ddprun::agent {

namespace {

using Clock = std::chrono::steady_clock;

// How long to wait for SIGKILLed workers to be reaped before giving up on them (a worker in
// uninterruptible sleep cannot be reaped; the agent must not hang on it).
constexpr std::chrono::seconds kReapAfterKillLimit{5};

OwnedFd open_log_file(const std::string& path) {
  OwnedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd)
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

// What the child's stream is connected to, and what the agent keeps for pumping it.
struct StreamWiring {
  OwnedFd child_end;
  std::optional<OutputPump> pump;
};

StreamWiring wire_stream(const StreamPlan& plan, int console_fd, const std::string& prefix) {
  StreamWiring wiring;
  if (!plan.to_console) {
    // Straight to the file (redirect) or nowhere: no copy through the agent.
    wiring.child_end = plan.file.empty() ? open_log_file("/dev/null") : open_log_file(plan.file);
    return wiring;
  }
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  }
  OwnedFd read_end(ends[0]);
  wiring.child_end = OwnedFd(ends[1]);
  OwnedFd file = plan.file.empty() ? OwnedFd() : open_log_file(plan.file);
  wiring.pump.emplace(std::move(read_end), console_fd, std::move(file), prefix);
  return wiring;
}

}  // namespace

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

WorkerGroup::WorkerGroup(const std::vector<WorkerLaunch>& launches, const sigset_t& child_mask) {
  workers_.reserve(launches.size());
  pumps_.reserve(launches.size() * 2);
  try {
    for (const auto& launch : launches) {
      StreamWiring out = wire_stream(launch.logs.out, STDOUT_FILENO, launch.console_prefix);
      StreamWiring err = wire_stream(launch.logs.err, STDERR_FILENO, launch.console_prefix);
      WorkerCommand command{launch.argv, launch.env, out.child_end.get(), err.child_end.get()};
      WorkerRecord record;
      record.local_rank = launch.local_rank;
      record.global_rank = launch.global_rank;
      record.error_file = launch.logs.error_file;
      record.pid = spawn_worker(command, child_mask);
      workers_.push_back(std::move(record));
      if (out.pump)
        pumps_.push_back(std::move(*out.pump));
      if (err.pump)
        pumps_.push_back(std::move(*err.pump));
      // child ends close here: the worker holds the only write ends, so EOF means it is gone
    }
  } catch (...) {
    kill_and_reap_bounded();
    throw;
  }
}

WorkerGroup::~WorkerGroup() {
  if (!all_exited())
    kill_and_reap_bounded();
  finish_output();
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
  for (auto& worker : workers_) {
    if (worker.exit)
      continue;
    int status = 0;
    pid_t rc = ::waitpid(worker.pid, &status, WNOHANG);
    if (rc == worker.pid) {
      worker.exit = worker_exit_from_wait_status(status);
      worker.exit_time_s = unix_time_now();
      worker.stopped_by_agent = stopping_;
    } else if (rc < 0 && errno == ECHILD) {
      worker.exit = WorkerExit{-SIGKILL};  // reaped elsewhere: treat as lost
      worker.exit_time_s = unix_time_now();
      worker.stopped_by_agent = stopping_;
    }
  }
}

void WorkerGroup::finish_output() {
  if (output_finished_ || !all_exited())
    return;
  for (auto& pump : pumps_)
    pump.finish();
  output_finished_ = true;
}

void WorkerGroup::signal_all(int sig) {
  stopping_ = true;
  reap();
  for (const auto& worker : workers_) {
    if (!worker.exit)
      signal_worker_group(worker.pid, sig);
  }
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
  // SIGKILLed workers die at once unless stuck in uninterruptible sleep (NCCL, RDMA): wait
  // for each on its pidfd, up to a bound, so the agent never hangs on one.
  const auto deadline = Clock::now() + kReapAfterKillLimit;
  for (auto& worker : workers_) {
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
