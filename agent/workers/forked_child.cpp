#include "agent/workers/forked_child.hpp"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace ddprun::agent {

void die_with_agent(pid_t agent_pid) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent_pid)
    ::_exit(1);
}

void close_descriptors_from(unsigned first) {
  ::syscall(SYS_close_range, first, ~0U, 0U);
}

void restore_signals(const sigset_t& mask) {
  struct sigaction default_action{};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &default_action, nullptr);
  // What exec would do, done before the mask opens: a signal that arrives between here and the
  // exec (a stop right after the start) must act as it will on the worker, not run a handler
  // of the agent's process in the child. Ignored signals stay ignored, as across exec.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current{};
    if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &current) != 0)
      continue;
    if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_IGN)
      ::sigaction(sig, &default_action, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
}

void write_all_raw(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0)
      return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

[[noreturn]] void exit_with_reason(std::string_view prefix, int error) {
  write_all_raw(STDERR_FILENO, prefix);
  write_all_raw(STDERR_FILENO, ::strerror(error));
  write_all_raw(STDERR_FILENO, "\n");
  ::_exit(127);
}

}  // namespace ddprun::agent
