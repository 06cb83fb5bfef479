#include "agent/base/heartbeat_channel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ddprun::agent {

HeartbeatChannel::HeartbeatChannel() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("heartbeat pipe: pipe2 failed: ") + std::strerror(errno));
  read_end_.reset(ends[0]);
  write_end_.reset(ends[1]);
}

HeartbeatChannel::Drained HeartbeatChannel::drain() {
  Drained drained;
  char buffer[4096];
  while (drained.bytes < kHeartbeatDrainBudgetBytes) {
    const ssize_t n = ::read(read_end_.get(), buffer, sizeof buffer);
    if (n > 0) {
      drained.bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    drained.closed = n == 0;  // otherwise EAGAIN: nothing more now
    break;
  }
  return drained;
}

void HeartbeatChannel::add_to_env(EnvMap& worker_env) {
  worker_env[kEnvName] = std::to_string(kWorkerFd);
}

int HeartbeatChannel::install_in_child(int write_end) noexcept {
  if (write_end == kWorkerFd) {
    // dup2 onto itself would leave close-on-exec set.
    if (::fcntl(kWorkerFd, F_SETFD, 0) != 0)
      return -1;
  } else if (::dup2(write_end, kWorkerFd) < 0) {
    return -1;
  }
  return kWorkerFd + 1;
}

}  // namespace ddprun::agent
