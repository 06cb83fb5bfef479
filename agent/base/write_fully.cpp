#include "agent/base/write_fully.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace ddprun::agent {

void write_fully(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd wait_writable{fd, POLLOUT, 0};
      ::poll(&wait_writable, 1, 1000);
      continue;
    }
    if (n <= 0)
      return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace ddprun::agent
