#include "agent/logs/output_pump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "agent/base/write_fully.hpp"

namespace ddprun::agent {

namespace {
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerWakeup = 16;  // fairness between workers that write a lot
constexpr int kMaxReadsAtFinish = 256;  // 16 MiB after the worker exited, then stop reading
}  // namespace

OutputPump::OutputPump(OwnedFd read_end, PumpConsole console, OwnedFd file_fd,
                       PumpDuplicate duplicate)
    : read_end_(std::move(read_end)),
      console_(console),
      file_fd_(std::move(file_fd)),
      duplicate_(std::move(duplicate)) {
  int flags = ::fcntl(read_end_.get(), F_GETFL);
  ::fcntl(read_end_.get(), F_SETFL, flags | O_NONBLOCK);
}

void OutputPump::copy_duplicates(const std::vector<std::string>& lines) {
  for (const auto& line : lines) {
    for (const auto& needle : duplicate_.needles) {
      if (line.find(needle) != std::string::npos) {
        const std::string text = duplicate_.prefix + line + "\n";
        write_fully(duplicate_.fd, text.data(), text.size());  // one write: one whole line
        break;
      }
    }
  }
}

void OutputPump::deliver(const char* data, std::size_t size) {
  if (file_fd_)
    write_fully(file_fd_.get(), data, size);
  if (console_.console != nullptr)
    console_.console->write(console_.writer, std::string_view(data, size));
  if (duplicate_.fd >= 0)
    copy_duplicates(duplicate_lines_.feed(std::string_view(data, size)));
}

void OutputPump::close_stream() {
  read_end_.reset();
  if (console_.console != nullptr)
    console_.console->end_line(console_.writer);
  if (duplicate_.fd >= 0)
    copy_duplicates(duplicate_lines_.finish());
  file_fd_.reset();
}

OutputPump::Drained OutputPump::drain(int max_reads) {
  char buffer[kReadChunk];
  for (int i = 0; i < max_reads; ++i) {
    const ssize_t n = ::read(read_end_.get(), buffer, sizeof buffer);
    if (n > 0) {
      deliver(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 && errno == EAGAIN ? Drained::kEmptyForNow : Drained::kEnded;
  }
  return Drained::kReadsSpent;
}

void OutputPump::on_readable() {
  if (read_end_ && drain(kMaxReadsPerWakeup) == Drained::kEnded)
    close_stream();  // end of file or a read error
}

void OutputPump::finish() {
  if (!read_end_)
    return;
  // Bounded: a grandchild that keeps the pipe open and writes forever must not hold us.
  drain(kMaxReadsAtFinish);
  close_stream();
}

}  // namespace ddprun::agent
