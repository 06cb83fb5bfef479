#pragma once
// The named pipe of torchrun's file-timer protocol, as a non-blocking line source for an event
// loop. FileTimerClient opens the FIFO O_WRONLY|O_NONBLOCK per request, writes one line and
// closes it; this end turns the bytes into complete lines.
//
// Why we hold a write end of our own: a FIFO's reader sees end-of-file, and poll/epoll report it
// readable (POLLHUP) without pause, whenever no writer is open. Clients connect for a moment per
// request, so without our own writer the loop would spin between requests (torchrun's thread
// sleeps instead, adding up to 1 s of latency). With it, the descriptor is readable exactly when
// a client has written, and read() never returns 0. The price: a writer that dies mid-line
// leaves its partial line in front of the next client's; FileTimerServer recovers from that.
//
// Error policy: the constructor throws std::runtime_error naming the path and errno; read_lines()
// never throws for what clients write (over-long lines are dropped and counted).
// Threading: one thread (the agent's event loop).

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "agent/base/owned_fd.hpp"

namespace ddprun::agent {

// One readable event reads at most this much, so a flooding client cannot starve the loop
// (64 KiB: a full pipe buffer).
inline constexpr std::size_t kFileTimerFifoReadBudgetBytes = 64 * 1024;

class FileTimerFifo {
 public:
  // As torchrun's FileTimerServer: removes whatever is at path, mkfifo(path, 0666 & ~umask),
  // then opens the read end (O_RDONLY|O_NONBLOCK) and our own write end. Both are close-on-exec.
  explicit FileTimerFifo(std::string path);
  // Unlinks the FIFO, unless the path now names another file (a newer server's FIFO).
  ~FileTimerFifo();
  FileTimerFifo(const FileTimerFifo&) = delete;
  FileTimerFifo& operator=(const FileTimerFifo&) = delete;

  const std::string& path() const { return path_; }
  // Wait for readable; then call read_lines().
  int fd() const { return read_end_.get(); }

  struct Line {
    std::string text;       // without '\n'; empty for an oversize line
    bool oversize = false;  // longer than kFileTimerMaxLineBytes: dropped whole, counted here
  };
  using Batch = std::vector<Line>;  // in arrival order
  // Reads what is available now (up to kFileTimerFifoReadBudgetBytes; if more is left the fd
  // stays readable). A partial line is kept until its '\n' arrives.
  Batch read_lines();

 private:
  void take_bytes(const char* data, std::size_t size, Batch& batch);

  std::string path_;
  OwnedFd read_end_;
  OwnedFd keep_alive_writer_;
  dev_t device_ = 0;  // identity of our FIFO, so the destructor removes only ours
  ino_t inode_ = 0;
  std::string partial_;               // bytes of an unfinished line
  bool discarding_oversize_ = false;  // inside a line already counted as oversize
};

}  // namespace ddprun::agent
