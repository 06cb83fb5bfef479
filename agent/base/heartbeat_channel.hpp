#pragma once
// The progress heartbeat channel of one worker (--watchdog-timeout): a pipe whose write end the
// worker inherits as fd kWorkerFd, named in its env as DDPRUN_HEARTBEAT_FD. A heartbeat is one
// write() of any byte; no PyTorch needed:
//   if "DDPRUN_HEARTBEAT_FD" in os.environ:
//       os.write(int(os.environ["DDPRUN_HEARTBEAT_FD"]), b".")
// Both ends are O_NONBLOCK: a worker never blocks on a full pipe (its write fails with EAGAIN,
// harmless: the agent has unread beats anyway), and the agent drains on readable.
//
// Lifetime, in the agent: construct before spawning the worker; pass worker_end() to the spawn
// (the child calls install_in_child()); close_worker_end() right after the spawn; keep the
// channel until the worker has been reaped (closing the read end earlier would turn a late
// heartbeat into SIGPIPE for the worker). Threading: the agent's event loop only.

#include <cstddef>

#include "agent/base/env_map.hpp"
#include "agent/base/owned_fd.hpp"

namespace ddprun::agent {

// One readable event drains at most this much: a full pipe (64 KiB).
inline constexpr std::size_t kHeartbeatDrainBudgetBytes = 64 * 1024;

class HeartbeatChannel {
 public:
  // The worker's descriptor number: fixed, so the env does not depend on the agent's fds.
  static constexpr int kWorkerFd = 3;
  static constexpr const char* kEnvName = "DDPRUN_HEARTBEAT_FD";

  // pipe2(O_CLOEXEC | O_NONBLOCK). Throws std::runtime_error with errno.
  HeartbeatChannel();

  // Read end: wait for readable, then call drain().
  int fd() const { return read_end_.get(); }
  // Write end for the spawn (-1 once closed).
  int worker_end() const { return write_end_.get(); }
  // After the worker is spawned: the agent keeps no writer, so drain() reports the end of the
  // channel once the worker (and any child that inherited fd 3) is gone.
  void close_worker_end() { write_end_.reset(); }

  struct Drained {
    std::size_t bytes = 0;  // > 0: the worker made progress
    bool closed = false;    // every writer is gone: stop waiting on fd() (it stays readable)
  };
  Drained drain();

  // Sets DDPRUN_HEARTBEAT_FD=3 in a worker's environment.
  static void add_to_env(EnvMap& worker_env);

  // For spawn_worker, between fork and exec, after stdout/stderr are in place:
  // async-signal-safe. Puts write_end at kWorkerFd, inheritable across exec. Returns the first
  // descriptor the child may close (kWorkerFd + 1), or -1 when dup2 failed (errno set).
  static int install_in_child(int write_end) noexcept;

 private:
  OwnedFd read_end_;
  OwnedFd write_end_;
};

}  // namespace ddprun::agent
