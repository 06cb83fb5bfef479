#pragma once
// The agent's stdout and stderr as the --tee'd worker streams of one worker group share them.
// Each stream writes through its own writer (a LinePrefixer with the worker's prefix); partial
// lines are written at once, and a line one stream left open is ended before another stream
// writes to the same terminal or file, so text of two workers never shares a line. stdout and
// stderr count as one console when they are the same open file (a terminal, or `2>&1`).
// Single-threaded: the thread that runs the worker group. Write errors are ignored (a closed
// console must not stop the job).

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "agent/logs/log_prefix.hpp"

namespace ddprun::agent {

enum class ConsoleStream { kOut, kErr };

class Console {
 public:
  // The agent's own fds 1 and 2.
  Console();
  // Any two fds (tests); they are not closed.
  Console(int out_fd, int err_fd);

  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // A new writer for one worker stream; returns its id.
  int add_writer(ConsoleStream stream, std::string prefix);
  // Writes the writer's bytes, prefixed, after ending another writer's open line on the same
  // console.
  void write(int writer, std::string_view bytes);
  // The writer's stream ended: ends its open line.
  void end_line(int writer);
  // Ends every open line, e.g. before the agent prints a message of its own.
  void end_open_lines();

 private:
  struct Writer {
    int fd;
    std::size_t slot;  // which console: 0 for stdout, 1 for stderr unless it is stdout's file
    LinePrefixer prefixer;
  };
  static constexpr int kNoWriter = -1;

  void end_line_in_slot(std::size_t slot);

  std::array<int, 2> fds_;
  bool same_file_ = false;
  std::vector<Writer> writers_;
  std::array<int, 2> open_line_writer_{kNoWriter, kNoWriter};
};

}  // namespace ddprun::agent
