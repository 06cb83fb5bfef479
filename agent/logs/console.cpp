#include "agent/logs/console.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "agent/base/write_fully.hpp"

namespace ddprun::agent {

namespace {

bool same_open_file(int a, int b) {
  struct stat sa{};
  struct stat sb{};
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

Console::Console() : Console(STDOUT_FILENO, STDERR_FILENO) {}

Console::Console(int out_fd, int err_fd)
    : fds_{out_fd, err_fd}, same_file_(same_open_file(out_fd, err_fd)) {}

int Console::add_writer(ConsoleStream stream, std::string prefix) {
  const std::size_t index = stream == ConsoleStream::kOut ? 0 : 1;
  const std::size_t slot = same_file_ ? 0 : index;
  writers_.push_back(Writer{fds_[index], slot, LinePrefixer(std::move(prefix))});
  return static_cast<int>(writers_.size() - 1);
}

void Console::end_line_in_slot(std::size_t slot) {
  const int owner = open_line_writer_[slot];
  if (owner == kNoWriter)
    return;
  Writer& open = writers_[static_cast<std::size_t>(owner)];
  const std::string end = open.prefixer.end_line();
  write_fully(open.fd, end.data(), end.size());
  open_line_writer_[slot] = kNoWriter;
}

void Console::write(int writer, std::string_view bytes) {
  Writer& w = writers_.at(static_cast<std::size_t>(writer));
  if (open_line_writer_[w.slot] != writer)
    end_line_in_slot(w.slot);
  const std::string text = w.prefixer.feed(bytes);
  write_fully(w.fd, text.data(), text.size());
  open_line_writer_[w.slot] = w.prefixer.line_open() ? writer : kNoWriter;
}

void Console::end_line(int writer) {
  const Writer& w = writers_.at(static_cast<std::size_t>(writer));
  if (open_line_writer_[w.slot] == writer)
    end_line_in_slot(w.slot);
}

void Console::end_open_lines() {
  end_line_in_slot(0);
  end_line_in_slot(1);
}

}  // namespace ddprun::agent
