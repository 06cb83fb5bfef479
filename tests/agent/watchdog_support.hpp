#pragma once
// Helpers for the watchdog tests: a child process with a stdin pipe, its output in a file and
// optionally a heartbeat pipe at fd 3 (installed exactly as spawn_worker must), bounded waits
// on descriptors, and the Python interpreters the tests use.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/heartbeat_channel.hpp"
#include "agent/workers/forked_child.hpp"
#include "e2e_support.hpp"

namespace ddprun::agent::watchdog_test {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// True when the python's environment (a venv: <bin>/../lib/python*/site-packages) has
// PyTorch's FileTimerClient, checked on disk so no test pays for `import torch` to find out.
inline bool has_file_timer_client(const std::string& python) {
  namespace fs = std::filesystem;
  const fs::path lib = fs::path(python).parent_path().parent_path() / "lib";
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(lib, error)) {
    if (fs::exists(entry.path() / "site-packages/torch/distributed/elastic/timer/"
                                  "file_based_local_timer.py"))
      return true;
  }
  return false;
}

// A python with PyTorch >= 2 (FileTimerClient, expires): the repository's .venv, else the one
// named by DDPRUN_TEST_TORCH_PYTHON. nullopt (the caller skips, saying why) when neither has it.
inline std::optional<std::string> torch_python() {
  std::vector<std::string> candidates{std::string(DDPRUN_SOURCE_DIR) + "/.venv/bin/python"};
  if (const char* named = std::getenv("DDPRUN_TEST_TORCH_PYTHON"))
    candidates.emplace_back(named);
  for (const std::string& python : candidates) {
    if (::access(python.c_str(), X_OK) == 0 && has_file_timer_client(python))
      return python;
  }
  return std::nullopt;
}

// CI always installs PyTorch 2.x: a missing one fails the test instead of passing it untested.
inline const char* kNoTorchPython =
    "no python with PyTorch 2.x: neither .venv/bin/python (scripts/install-deps.sh) "
    "nor DDPRUN_TEST_TORCH_PYTHON (a venv's bin/python) has torch.distributed.elastic.timer";

// Any python for processes that need no PyTorch: the torch one if present (its bin/ may hold
// py-spy), else the system's.
inline std::string any_python() {
  return torch_python().value_or("/usr/bin/python3");
}

// Waits until fd is readable or the deadline passes.
inline bool wait_readable(int fd, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd ready{fd, POLLIN, 0};
    const int n = ::poll(&ready, 1, static_cast<int>(std::max<long long>(0, left.count())));
    if (n > 0)
      return true;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

struct ChildOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env_changes;
  std::string output_path;              // stdout and stderr
  int heartbeat_fd = -1;                // installed at fd 3 as spawn_worker must
  bool heartbeat_already_at_3 = false;  // dup it onto 3 with close-on-exec first (edge case)
};

// A child process, killed on destruction; stdin is a pipe the test writes to.
class ChildProcess {
 public:
  explicit ChildProcess(ChildOptions options) : output_path_(options.output_path) {
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      if (!options.env_changes.contains(entry.substr(0, entry.find('='))))
        env_storage.push_back(entry);
    }
    for (const auto& [name, value] : options.env_changes)
      env_storage.push_back(name + "=" + value);
    std::vector<char*> args, envp;
    for (auto& a : options.argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env_storage)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int stdin_pipe[2];
    if (::pipe2(stdin_pipe, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    const int out = ::open(output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      agent::die_with_agent(parent);
      sigset_t empty;
      ::sigemptyset(&empty);
      agent::restore_signals(empty);
      ::dup2(stdin_pipe[0], 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
      int first_to_close = 3;
      if (options.heartbeat_fd >= 0) {
        int source = options.heartbeat_fd;
        if (options.heartbeat_already_at_3) {
          ::dup3(source, HeartbeatChannel::kWorkerFd, O_CLOEXEC);
          source = HeartbeatChannel::kWorkerFd;
        }
        first_to_close = HeartbeatChannel::install_in_child(source);
        if (first_to_close < 0)
          ::_exit(126);
      }
      ::close_range(static_cast<unsigned>(first_to_close), ~0U, 0);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::close(out);
    ::close(stdin_pipe[0]);
    stdin_.reset(stdin_pipe[1]);
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  }
  ~ChildProcess() {
    if (!status_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      wait_exit(10s);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void write_stdin(const std::string& text) const {
    [[maybe_unused]] const ssize_t n = ::write(stdin_.get(), text.data(), text.size());
  }
  // The raw wait status, nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds limit) {
    if (status_)
      return status_;
    if (!wait_readable(pidfd_.get(), Clock::now() + limit))
      return std::nullopt;
    int raw = 0;
    if (::waitpid(pid_, &raw, 0) != pid_)
      return std::nullopt;
    status_ = raw;
    return status_;
  }
  std::string output() const { return e2e::read_file(output_path_); }
  // Waits until the output contains text.
  bool wait_output(const std::string& text, std::chrono::milliseconds limit) const {
    return e2e::wait_for_file(
        output_path_, [&](const std::string& out) { return out.find(text) != std::string::npos; },
        limit);
  }

 private:
  pid_t pid_ = -1;
  OwnedFd pidfd_;
  OwnedFd stdin_;
  std::string output_path_;
  std::optional<int> status_;
};

}  // namespace ddprun::agent::watchdog_test
