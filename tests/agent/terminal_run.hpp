#pragma once
// Runs a command on a pseudo-terminal of its own, as from an interactive shell, for the tests
// that check what workers see (isatty) and what reaches the terminal.

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../exec_args.hpp"

namespace ddprun::agent::e2e {

struct TerminalRun {
  std::optional<int> status;  // exit status; nullopt when killed (past the limit)
  std::string output;         // everything written to the terminal
};

// Runs argv with a new pseudo-terminal (raw, so the text arrives as written) as its
// controlling terminal and stdin/stdout/stderr, as an interactive shell would; returns
// everything written to the terminal once every writer has closed it, and the exit status.
// env_changes are set on top of this process's environment.
inline TerminalRun run_in_terminal(const std::vector<std::string>& argv,
                                   const std::map<std::string, std::string>& env_changes = {},
                                   std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  int master = -1;
  int slave = -1;
  termios raw{};
  ::cfmakeraw(&raw);
  REQUIRE(::openpty(&master, &slave, nullptr, &raw, nullptr) == 0);
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!env_changes.contains(entry.substr(0, entry.find('='))))
      environment.push_back(entry);
  }
  for (auto& entry : ddprun::testing::environment_entries(env_changes))
    environment.push_back(std::move(entry));
  const ddprun::testing::ExecArgs args(argv);
  const ddprun::testing::ExecArgs envp(std::move(environment));
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setsid();
    ::ioctl(slave, TIOCSCTTY, 0);
    for (int fd = 0; fd < 3; ++fd)
      ::dup2(slave, fd);
    ::close(slave);
    ::close(master);
    ::execve(args.get()[0], args.get(), envp.get());
    ::_exit(127);
  }
  ::close(slave);
  TerminalRun run;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {  // EIO once the last writer (ddprun and its workers) has closed the terminal
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{master, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      break;
    char buffer[4096];
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0)
      break;
    run.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(master);
  ::kill(pid, SIGKILL);  // only matters past the deadline; a reaped pid is not signalled
  int raw_status = 0;
  if (::waitpid(pid, &raw_status, 0) == pid && WIFEXITED(raw_status))
    run.status = WEXITSTATUS(raw_status);
  return run;
}

}  // namespace ddprun::agent::e2e
