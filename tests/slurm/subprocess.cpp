#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddprun::slurm_test {
namespace {

constexpr std::size_t kMaxCapturedBytes = 4u << 20;

// Closes a descriptor when it goes out of scope.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = -1;
  }

 private:
  int fd_;
};

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

int decode_status(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  if (argv.empty()) {
    throw std::invalid_argument("run_command: empty command");
  }
  std::vector<char*> c_argv;
  for (const auto& arg : argv) {
    c_argv.push_back(const_cast<char*>(arg.c_str()));
  }
  c_argv.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    fail("pipe2");
  }
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);

  const pid_t pid = ::fork();
  if (pid < 0) {
    fail("fork");
  }
  if (pid == 0) {
    // Own process group, so a timeout can kill everything the command started.
    ::setpgid(0, 0);
    ::dup2(write_end.get(), STDOUT_FILENO);
    ::dup2(write_end.get(), STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
    }
    ::execvp(c_argv[0], c_argv.data());
    const std::string message = "exec " + argv[0] + ": " + std::strerror(errno) + "\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also in the parent, so the group exists before any kill below
  write_end.reset();

  // A pidfd says when the command exits even if a daemon it started keeps the pipe open.
  UniqueFd exit_fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (exit_fd.get() < 0) {
    fail("pidfd_open");
  }

  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool pipe_open = true;
  bool exited = false;
  char buffer[8192];
  while (!exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{exit_fd.get(), POLLIN, 0}, {read_end.get(), POLLIN, 0}};
    const int ready = ::poll(fds, pipe_open ? 2 : 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) {
      fail("poll");
    }
    if (pipe_open && fds[1].revents != 0) {
      const ssize_t got = ::read(read_end.get(), buffer, sizeof buffer);
      if (got > 0) {
        if (result.output.size() < kMaxCapturedBytes) {
          result.output.append(buffer, static_cast<std::size_t>(got));
        }
      } else if (got == 0 || errno != EINTR) {
        pipe_open = false;
      }
    }
    exited = fds[0].revents != 0;
  }
  // The command has exited (or was killed): take what is still buffered, without blocking on
  // descendants that may hold the pipe.
  if (pipe_open) {
    ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
    ssize_t got;
    while ((got = ::read(read_end.get(), buffer, sizeof buffer)) > 0) {
      if (result.output.size() < kMaxCapturedBytes) {
        result.output.append(buffer, static_cast<std::size_t>(got));
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fail("waitpid");
    }
  }
  result.exit_status = decode_status(status);
  return result;
}

}  // namespace ddprun::slurm_test
