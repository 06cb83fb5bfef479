#pragma once
// The agent's signals as a readable descriptor. The constructor blocks SIGCHLD and the
// handled signals in the calling thread (so in every thread created after it) and opens a
// signalfd: worker exits and forwarded signals become events in the run loop's poll(), with
// no handler and no polling of waitpid.

#include <signal.h>

#include <vector>

#include "agent/base/owned_fd.hpp"

namespace ddprun::agent {

class SignalChannel {
 public:
  // handled: the signals forwarded to workers (SIGTERM, SIGINT, ... and --signals_to_handle).
  explicit SignalChannel(const std::vector<int>& handled);
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  int fd() const { return fd_.get(); }

  struct Drained {
    bool child_exited = false;         // at least one SIGCHLD
    std::vector<int> handled_signals;  // in arrival order
  };
  // Reads every pending signal without blocking.
  Drained drain();

  // The mask a child must restore before exec (the one in force before the constructor).
  const sigset_t& original_mask() const { return original_mask_; }

 private:
  OwnedFd fd_;
  sigset_t original_mask_{};
};

}  // namespace ddprun::agent
