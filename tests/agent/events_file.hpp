#pragma once
// Reading an agent's --events-file (one JSON object per line) in the end-to-end tests.

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_support.hpp"

namespace ddprun::agent::e2e {

inline std::vector<nlohmann::json> read_events(const std::string& path) {
  std::vector<nlohmann::json> events;
  std::istringstream lines(read_file(path));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty())
      events.push_back(nlohmann::json::parse(line));
  }
  return events;
}

inline std::vector<nlohmann::json> events_named(std::vector<nlohmann::json> events,
                                                const std::string& name) {
  std::vector<nlohmann::json> matching;
  for (auto& event : events) {
    if (event["event"] == name)
      matching.push_back(std::move(event));
  }
  return matching;
}

inline std::vector<nlohmann::json> events_named(const std::string& path, const std::string& name) {
  return events_named(read_events(path), name);
}

// The worker pids of the latest workers_started event; empty before any.
inline std::vector<pid_t> latest_worker_pids(const std::string& events_path) {
  auto started = events_named(events_path, "workers_started");
  return started.empty() ? std::vector<pid_t>{} : started.back()["pids"].get<std::vector<pid_t>>();
}

// The node's group rank in its latest round; -1 before any.
inline int latest_group_rank(const std::string& events_path) {
  auto formed = events_named(events_path, "round_formed");
  return formed.empty() ? -1 : formed.back()["group_rank"].get<int>();
}

}  // namespace ddprun::agent::e2e
