#include "progress_heartbeat.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ddprun::train {

namespace {

constexpr const char* kHeartbeatFdEnv = "DDPRUN_HEARTBEAT_FD";
constexpr int kMaxFdDigits = 9;

bool is_pipe(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 && S_ISFIFO(info.st_mode);
}

}  // namespace

std::optional<int> parse_heartbeat_fd(const char* value) {
  if (value == nullptr || *value == '\0' || std::strlen(value) > kMaxFdDigits)
    return std::nullopt;
  int fd = 0;
  for (const char* c = value; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9')
      return std::nullopt;
    fd = fd * 10 + (*c - '0');
  }
  return fd;
}

ProgressHeartbeat ProgressHeartbeat::from_environment() {
  const std::optional<int> fd = parse_heartbeat_fd(std::getenv(kHeartbeatFdEnv));
  return ProgressHeartbeat(fd && is_pipe(*fd) ? *fd : -1);
}

void ProgressHeartbeat::beat() {
  if (fd_ < 0)
    return;
  const char byte = '.';
  ssize_t n = 0;
  do {
    n = ::write(fd_, &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    fd_ = -1;
}

}  // namespace ddprun::train
