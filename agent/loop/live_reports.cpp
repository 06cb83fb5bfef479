#include "agent/loop/live_reports.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace ddprun::agent {

LiveReports::LiveReports(boost::asio::io_context& io, std::function<void(uint64_t)> on_broken)
    : on_broken_(std::move(on_broken)) {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd >= 0) {
    inotify_.emplace(io, fd);
  }
}

void LiveReports::watch(const std::string& control_path) {
  if (!inotify_) {
    return;
  }
  const std::filesystem::path path(control_path);
  if (watch_descriptor_ >= 0) {
    ::inotify_rm_watch(inotify_->native_handle(), watch_descriptor_);
  }
  watch_descriptor_ = ::inotify_add_watch(inotify_->native_handle(), path.parent_path().c_str(),
                                          IN_MOVED_TO | IN_CLOSE_WRITE);
  folder_ = path.parent_path().string();
  report_prefix_ = path.filename().string() + ".broken.";
  arm();
}

void LiveReports::arm() {
  inotify_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& error) {
                         if (!error) {
                           on_readable();
                         }
                       });
}

void LiveReports::on_readable() {
  // Events are read whole (the kernel never splits one); a name is at most NAME_MAX + 1.
  alignas(inotify_event) std::array<char, 16 * 1024> buffer{};
  std::vector<std::string> reports;
  for (;;) {
    const ssize_t size = ::read(inotify_->native_handle(), buffer.data(), buffer.size());
    if (size <= 0) {
      break;
    }
    for (ssize_t offset = 0; offset < size;) {
      inotify_event event{};
      std::memcpy(&event, buffer.data() + offset, sizeof event);
      const std::string name =
          event.len > 0 ? std::string(buffer.data() + offset + sizeof event) : std::string();
      if (name.rfind(report_prefix_, 0) == 0) {
        reports.push_back(folder_ + "/" + name);
      }
      offset += static_cast<ssize_t>(sizeof event + event.len);
    }
  }
  for (const auto& report : reports) {
    // The worker's own file, a few bytes: its generation, or nothing usable.
    std::ifstream file(report);
    uint64_t generation = 0;
    if (file >> generation && on_broken_) {
      on_broken_(generation);
    }
  }
  arm();
}

}  // namespace ddprun::agent
