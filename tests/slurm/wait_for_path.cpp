#include "wait_for_path.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ddprun::slurm_test {

bool wait_for_path(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) {
    throw std::runtime_error(std::string("inotify_init1: ") + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const auto folder = path.parent_path();
  if (::inotify_add_watch(fd, folder.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    throw std::runtime_error("inotify_add_watch " + folder.string() + ": " + std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Checked after the watch is in place, so a file created in between is not missed.
  while (!std::filesystem::exists(path)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) > 0) {
      char events[4096];
      while (::read(fd, events, sizeof events) > 0) {
      }
    }
  }
  return true;
}

}  // namespace ddprun::slurm_test
