#include "socket_set.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iterator>
#include <string>
#include <system_error>

namespace ddprun::train {

std::set<int> open_sockets() {
  std::set<int> sockets;
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
      sockets.insert(fd);
    }
  }
  return sockets;
}

std::set<int> sockets_opened_between(const std::set<int>& before, const std::set<int>& after) {
  std::set<int> opened;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::inserter(opened, opened.end()));
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
