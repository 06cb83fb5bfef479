#include "agent/watchdog/file_timer/file_timer_fifo.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "agent/watchdog/file_timer/file_timer_request.hpp"

namespace ddprun::agent {

namespace {

[[noreturn]] void fail(const std::string& step, const std::string& path) {
  throw std::runtime_error("file-timer FIFO " + path + ": " + step +
                           " failed: " + std::strerror(errno));
}

// After mkfifo: nobody else would remove the FIFO we made.
[[noreturn]] void remove_and_fail(const std::string& step, const std::string& path) {
  const int saved = errno;
  ::unlink(path.c_str());
  errno = saved;
  fail(step, path);
}

}  // namespace

FileTimerFifo::FileTimerFifo(std::string path) : path_(std::move(path)) {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT)
    fail("removing the existing file", path_);
  if (::mkfifo(path_.c_str(), 0666) != 0)
    fail("mkfifo", path_);
  read_end_.reset(::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!read_end_)
    remove_and_fail("opening for reading", path_);
  struct stat info{};
  if (::fstat(read_end_.get(), &info) != 0)
    remove_and_fail("fstat", path_);
  device_ = info.st_dev;
  inode_ = info.st_ino;
  // Opening the write end cannot block or fail with ENXIO: our reader is already open.
  keep_alive_writer_.reset(::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!keep_alive_writer_)
    remove_and_fail("opening our own write end", path_);
}

FileTimerFifo::~FileTimerFifo() {
  struct stat info{};
  if (::lstat(path_.c_str(), &info) == 0 && info.st_dev == device_ && info.st_ino == inode_)
    ::unlink(path_.c_str());
}

FileTimerFifo::Batch FileTimerFifo::read_lines() {
  Batch batch;
  char buffer[4096];
  std::size_t budget = kFileTimerFifoReadBudgetBytes;
  while (budget > 0) {
    const ssize_t n = ::read(read_end_.get(), buffer, std::min(sizeof buffer, budget));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)  // EAGAIN: drained. 0 cannot happen while we hold a writer.
      break;
    take_bytes(buffer, static_cast<std::size_t>(n), batch);
    budget -= static_cast<std::size_t>(n);
  }
  return batch;
}

void FileTimerFifo::take_bytes(const char* data, std::size_t size, Batch& batch) {
  while (size > 0) {
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', size));
    const std::size_t chunk = newline ? static_cast<std::size_t>(newline - data) : size;
    if (!discarding_oversize_) {
      if (partial_.size() + chunk > kFileTimerMaxLineBytes) {
        // Counted now, dropped up to its '\n': memory stays bounded whatever a client writes.
        batch.push_back(Line{{}, true});
        discarding_oversize_ = true;
        partial_.clear();
      } else {
        partial_.append(data, chunk);
      }
    }
    if (!newline)
      return;
    if (!discarding_oversize_)
      batch.push_back(Line{std::move(partial_), false});
    partial_.clear();
    discarding_oversize_ = false;
    data += chunk + 1;
    size -= chunk + 1;
  }
}

}  // namespace ddprun::agent
