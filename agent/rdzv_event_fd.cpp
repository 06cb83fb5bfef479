#include "agent/rdzv_event_fd.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace ddprun::agent::rdzv {

EventFd::EventFd() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "eventfd");
  }
}

EventFd::~EventFd() {
  close(fd_);
}

void EventFd::signal() const {
  const uint64_t one = 1;
  // Only fails when the counter would overflow, i.e. it is readable already.
  [[maybe_unused]] auto written = write(fd_, &one, sizeof(one));
}

void EventFd::drain() const {
  uint64_t value = 0;
  // EAGAIN when nothing is pending: that is the drained state.
  [[maybe_unused]] auto got = read(fd_, &value, sizeof(value));
}

}  // namespace ddprun::agent::rdzv
