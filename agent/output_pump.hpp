#pragma once
// One worker stream piped through the agent: reads what the worker wrote, copies the raw
// bytes to the --tee file and the prefixed lines to the agent's own stdout or stderr.

#include <string>

#include "agent/log_prefix.hpp"
#include "agent/owned_fd.hpp"

namespace ddprun::agent {

class OutputPump {
 public:
  // read_end: the pipe's read end (made non-blocking here). console_fd: 1 or 2, or -1 when
  // this rank is not shown. file_fd: the tee file, or an empty OwnedFd.
  OutputPump(OwnedFd read_end, int console_fd, OwnedFd file_fd, std::string prefix);

  int fd() const { return read_end_.get(); }
  bool open() const { return static_cast<bool>(read_end_); }

  // Moves whatever is readable now; closes the pipe at end of file.
  void on_readable();
  // The worker is gone: copies what is left without waiting and flushes the partial line.
  void finish();

 private:
  void deliver(const char* data, std::size_t size);
  void close_stream();

  OwnedFd read_end_;
  int console_fd_;
  OwnedFd file_fd_;
  LinePrefixer prefixer_;
};

// Writes everything, retrying on EINTR and short writes; gives up silently on other errors
// (a closed console must not stop the job).
void write_fully(int fd, const char* data, std::size_t size);

}  // namespace ddprun::agent
