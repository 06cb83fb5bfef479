#include "socket_set.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <filesystem>
#include <string>
#include <system_error>

namespace ddprun::train {

SocketSet open_sockets() {
  SocketSet sockets;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    const auto [end, parsed] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (parsed != std::errc() || end != name.data() + name.size()) {
      continue;
    }
    struct stat info{};
    if (::fstat(fd, &info) == 0 && S_ISSOCK(info.st_mode)) {
      sockets.emplace(fd, info.st_ino);
    }
  }
  return sockets;
}

std::set<int> sockets_opened_between(const SocketSet& before, const SocketSet& after) {
  std::set<ino_t> old;
  for (const auto& [fd, inode] : before) {
    old.insert(inode);
  }
  std::set<int> opened;
  for (const auto& [fd, inode] : after) {
    if (!old.contains(inode)) {
      opened.insert(fd);
    }
  }
  return opened;
}

void shut_down_sockets(const std::set<int>& sockets) {
  for (const int fd : sockets) {
    // Not a listening socket: Gloo's listener thread treats a failed accept as fatal (it
    // aborts the process); only the connections carry the collectives.
    int listening = 0;
    socklen_t size = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening != 0) {
      continue;
    }
    ::shutdown(fd, SHUT_RDWR);
  }
}

}  // namespace ddprun::train
