#pragma once
// The trainer's side of ddprun's progress watchdog (--watchdog-timeout): when the agent passes a
// heartbeat pipe (env DDPRUN_HEARTBEAT_FD), beat() writes one byte to it. Without the variable,
// or when it does not name an open pipe (a process that inherited the variable but not the
// descriptor), beat() does nothing. No LibTorch.

#include <optional>

namespace ddprun::train {

class ProgressHeartbeat {
 public:
  // From DDPRUN_HEARTBEAT_FD in this process's environment.
  static ProgressHeartbeat from_environment();
  // fd: the pipe's write end; -1 disables.
  explicit ProgressHeartbeat(int fd) : fd_(fd) {}

  // One byte, never blocking (the agent's pipe is non-blocking: a full pipe already holds
  // unread beats, so EAGAIN loses nothing). After an error that will not go away (the agent
  // closed its end) it stops trying.
  void beat();
  bool enabled() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The variable's value as a descriptor number: decimal digits only, nullopt otherwise.
std::optional<int> parse_heartbeat_fd(const char* value);

}  // namespace ddprun::train
