#pragma once
// --events-file: one JSON object per line per agent event, for monitoring. Each line is one
// write(2) on an O_APPEND descriptor, so concurrent agents sharing a file never interleave.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/base/owned_fd.hpp"

namespace ddprun::agent {

class EventLog {
 public:
  // No path: every record() is a no-op. Throws std::runtime_error when the file cannot be opened.
  EventLog(const std::optional<std::string>& path, std::string node);

  // Adds "time" (unix seconds, fractional), "event" and "node" to fields and appends the line.
  void record(const std::string& event, nlohmann::json fields = nlohmann::json::object());

  // Also hands every line to `observer` (the job page keeps the recent ones), file or not.
  void observe(std::function<void(const std::string& line)> observer) {
    observer_ = std::move(observer);
  }

  // The line record() writes, without the I/O (exposed for tests).
  static std::string format_line(double time_s, const std::string& node, const std::string& event,
                                 nlohmann::json fields);

 private:
  OwnedFd fd_;
  std::string node_;
  std::function<void(const std::string&)> observer_;
};

}  // namespace ddprun::agent
