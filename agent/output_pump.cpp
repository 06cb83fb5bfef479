#include "agent/output_pump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace ddprun::agent {

namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerWakeup = 16;  // fairness between workers that write a lot
}  // namespace

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

OutputPump::OutputPump(OwnedFd read_end, int console_fd, OwnedFd file_fd, std::string prefix)
    : read_end_(std::move(read_end)),
      console_fd_(console_fd),
      file_fd_(std::move(file_fd)),
      prefixer_(std::move(prefix)) {
  int flags = ::fcntl(read_end_.get(), F_GETFL);
  ::fcntl(read_end_.get(), F_SETFL, flags | O_NONBLOCK);
}

void OutputPump::deliver(const char* data, std::size_t size) {
  if (file_fd_)
    write_fully(file_fd_.get(), data, size);
  if (console_fd_ >= 0) {
    const std::string lines = prefixer_.feed(std::string_view(data, size));
    write_fully(console_fd_, lines.data(), lines.size());
  }
}

void OutputPump::close_stream() {
  read_end_.reset();
  if (console_fd_ >= 0) {
    const std::string rest = prefixer_.finish();
    write_fully(console_fd_, rest.data(), rest.size());
  }
  file_fd_.reset();
}

void OutputPump::on_readable() {
  if (!read_end_)
    return;
  char buffer[kReadChunk];
  for (int i = 0; i < kMaxReadsPerWakeup; ++i) {
    ssize_t n = ::read(read_end_.get(), buffer, sizeof buffer);
    if (n > 0) {
      deliver(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    close_stream();  // end of file or a read error
    return;
  }
}

void OutputPump::finish() {
  if (!read_end_)
    return;
  char buffer[kReadChunk];
  // Bounded: a grandchild that keeps the pipe open and writes forever must not hold us.
  for (int i = 0; i < 256; ++i) {
    ssize_t n = ::read(read_end_.get(), buffer, sizeof buffer);
    if (n > 0) {
      deliver(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    break;
  }
  close_stream();
}

}  // namespace ddprun::agent
