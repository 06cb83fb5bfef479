#include "agent/base/event_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace ddprun::agent {

EventLog::EventLog(const std::optional<std::string>& path, std::string node)
    : node_(std::move(node)) {
  if (!path)
    return;
  fd_ = OwnedFd(::open(path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd_) {
    throw std::runtime_error("cannot open the events file " + *path + ": " + std::strerror(errno));
  }
}

std::string EventLog::format_line(double time_s, const std::string& node, const std::string& event,
                                  nlohmann::json fields) {
  if (!fields.is_object())
    fields = nlohmann::json::object();
  fields["time"] = time_s;
  fields["event"] = event;
  fields["node"] = node;
  return fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void EventLog::record(const std::string& event, nlohmann::json fields) {
  if (!fd_ && !observer_)
    return;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = format_line(now, node_, event, std::move(fields));
  if (observer_)
    observer_(line);
  if (!fd_)
    return;
  // A monitoring file must never stop the job: a failed write is dropped.
  [[maybe_unused]] ssize_t written = ::write(fd_.get(), line.data(), line.size());
}

}  // namespace ddprun::agent
