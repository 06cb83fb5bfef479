#pragma once
// A real child process for the trainer tests: spawned with its own environment and working
// folder, stdout+stderr captured through a pipe, waited for with a deadline (never a sleep).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace ddprun::test {

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::string& working_dir) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    read_fd_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const auto name = entry.substr(0, entry.find('='));
      if (env.count(name) == 0) {
        env_strings.push_back(entry);
      }
    }
    for (const auto& [name, value] : env) {
      env_strings.push_back(name + "=" + value);
    }
    std::vector<char*> args;
    for (const auto& a : argv) {
      args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : env_strings) {
      envp.push_back(const_cast<char*>(e.c_str()));
    }
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(read_fd_);
      throw std::runtime_error("cannot spawn " + argv[0]);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    ::close(read_fd_);
  }

  void signal(int signo) { ::kill(pid_, signo); }
  pid_t pid() const { return pid_; }

  // Reads output until `text` appears; false on EOF or deadline.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (output_.find(text, scanned_) == std::string::npos) {
      if (!read_some(deadline)) {
        return false;
      }
    }
    scanned_ = output_.find(text, scanned_) + text.size();
    return true;
  }

  // Exit code (128+signal for a signal death), or nullopt at the deadline.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (read_some(deadline)) {
    }
    if (!eof_) {
      return std::nullopt;  // deadline
    }
    if (!status_) {
      // The pipe closed, so the child is exiting (it hands the pipe to nobody else).
      int status = 0;
      ::waitpid(pid_, &status, 0);
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return status_;
  }

  const std::string& output() const { return output_; }

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    if (eof_) {
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd p{read_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return false;
    }
    char buffer[4096];
    const ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int read_fd_ = -1;
  bool eof_ = false;
  std::string output_;
  size_t scanned_ = 0;
  std::optional<int> status_;
};

}  // namespace ddprun::test
