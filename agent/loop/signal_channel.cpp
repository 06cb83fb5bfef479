#include "agent/loop/signal_channel.hpp"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ddprun::agent {

SignalChannel::SignalChannel(const std::vector<int>& handled) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int sig : handled) {
    if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD)
      continue;  // cannot or need not
    sigaddset(&mask, sig);
  }
  if (int rc = pthread_sigmask(SIG_BLOCK, &mask, &original_mask_); rc != 0) {
    throw std::runtime_error(std::string("cannot block signals: ") + std::strerror(rc));
  }
  fd_ = OwnedFd(signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_)
    throw std::runtime_error(std::string("signalfd failed: ") + std::strerror(errno));
}

SignalChannel::~SignalChannel() {
  pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

SignalChannel::Drained SignalChannel::drain() {
  Drained drained;
  signalfd_siginfo info{};
  for (;;) {
    ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n != static_cast<ssize_t>(sizeof info)) {
      if (n < 0 && errno == EINTR)
        continue;
      break;  // EAGAIN: nothing left
    }
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      drained.child_exited = true;
    } else {
      drained.handled_signals.push_back(sig);
    }
  }
  return drained;
}

}  // namespace ddprun::agent
