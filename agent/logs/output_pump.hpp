#pragma once
// One --tee'd worker stream piped through the agent: reads what the worker wrote and copies
// the raw bytes to the log file, the prefixed text to the console (partial lines at once), and
// the lines that match --duplicate-*-filters, prefixed, to the attempt's filtered_*.log.
// Streams that are not tee'd never come through the agent (the worker writes to the agent's
// console, a file or /dev/null itself).
// Driven from outside: wait for fd() to be readable, call on_readable(); call finish() once the
// worker is gone. Single-threaded.

#include <string>
#include <vector>

#include "agent/base/owned_fd.hpp"
#include "agent/logs/console.hpp"
#include "agent/logs/log_prefix.hpp"

namespace ddprun::agent {

// Where the console part of a pumped stream goes: a writer of the group's console, or nowhere.
struct PumpConsole {
  Console* console = nullptr;
  int writer = -1;
};

// --duplicate-*-filters: lines containing any needle are appended, prefixed, to fd (shared by
// every pump of the attempt, opened with O_APPEND so whole lines never interleave).
struct PumpDuplicate {
  int fd = -1;  // -1: no duplicate file
  std::vector<std::string> needles;
  std::string prefix;
};

class OutputPump {
 public:
  // read_end: the pipe's read end (made non-blocking here). file_fd: the log file, or an empty
  // OwnedFd.
  OutputPump(OwnedFd read_end, PumpConsole console, OwnedFd file_fd, PumpDuplicate duplicate = {});

  int fd() const { return read_end_.get(); }
  bool open() const { return static_cast<bool>(read_end_); }

  // Moves whatever is readable now; closes the pipe at end of file.
  void on_readable();
  // The worker is gone: copies what is left without waiting and ends the open console line.
  void finish();

 private:
  enum class Drained { kEmptyForNow, kEnded, kReadsSpent };  // kEnded: end of file or an error
  // Reads and delivers up to max_reads chunks, until the pipe is empty for now or ends.
  Drained drain(int max_reads);
  void deliver(const char* data, std::size_t size);
  void copy_duplicates(const std::vector<std::string>& lines);
  void close_stream();

  OwnedFd read_end_;
  PumpConsole console_;
  OwnedFd file_fd_;
  PumpDuplicate duplicate_;
  LineSplitter duplicate_lines_;
};

}  // namespace ddprun::agent
