#pragma once
// Test helper: a child process with its stdout on a pipe; every wait has a deadline
// (pidfd + poll, no sleeping), and a child still running at destruction is killed.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace ddprun::rendezvous::store::testing {

class ChildProcess {
 public:
  // argv[0] is the program path; extra_env entries are "NAME=value" added to ours.
  ChildProcess(const std::vector<std::string>& argv,
               const std::vector<std::string>& extra_env = {}) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      env_strings.emplace_back(*entry);
    }
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> env;
    for (auto& entry : env_strings) {
      env.push_back(entry.data());
    }
    env.push_back(nullptr);
    const int spawned =
        posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    stdout_fd_ = pipe_fds[0];
    if (spawned != 0) {
      throw std::runtime_error("cannot start " + argv[0]);
    }
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  ~ChildProcess() {
    if (!exit_status_) {
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(10));
    }
    ::close(stdout_fd_);
    ::close(pidfd_);
  }

  // One line of stdout (without the newline), or nullopt at EOF or timeout.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (const auto newline = buffered_.find('\n'); newline != std::string::npos) {
        std::string line = buffered_.substr(0, newline);
        buffered_.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd entry{stdout_fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&entry, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      char chunk[4096];
      const ssize_t got = ::read(stdout_fd_, chunk, sizeof(chunk));
      if (got <= 0) {
        return std::nullopt;
      }
      buffered_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  void signal(int number) { ::kill(pid_, number); }
  pid_t pid() const { return pid_; }

  // The wait status once the child exited, or nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (exit_status_) {
      return exit_status_;
    }
    pollfd entry{pidfd_, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(timeout.count())) <= 0) {
      return std::nullopt;
    }
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) {
      exit_status_ = status;
    }
    return exit_status_;
  }

  // Exit code if the child exited normally, else -1 (or -2 if it is still running).
  int exit_code(std::chrono::milliseconds timeout) {
    const auto status = wait_exit(timeout);
    if (!status) {
      return -2;
    }
    return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  std::optional<int> exit_status_;
};

// Starts ddprun-store on 127.0.0.1 port 0 and reads its address line.
struct StoreDaemon {
  explicit StoreDaemon(std::vector<std::string> extra_args = {})
      : process([&] {
          std::vector<std::string> argv{std::string(DDPRUN_BIN_DIR) + "/ddprun-store", "--host",
                                        "127.0.0.1", "--port", "0"};
          argv.insert(argv.end(), extra_args.begin(), extra_args.end());
          return argv;
        }()) {
    const auto line = process.read_line(std::chrono::seconds(10));
    if (!line || line->rfind("127.0.0.1:", 0) != 0) {
      throw std::runtime_error("ddprun-store did not print its address");
    }
    port = static_cast<uint16_t>(std::stoi(line->substr(10)));
  }
  ChildProcess process;
  uint16_t port = 0;
};

}  // namespace ddprun::rendezvous::store::testing
