#include "agent/workers/process_state.hpp"

#include <fstream>
#include <sstream>

#include "common/text.hpp"

namespace ddprun::agent {

std::optional<std::string> state_from_proc_status(std::string_view status) {
  constexpr std::string_view kKey = "State:";
  std::size_t line_start = 0;
  while (line_start < status.size()) {
    std::size_t line_end = status.find('\n', line_start);
    if (line_end == std::string_view::npos)
      line_end = status.size();
    const std::string_view line = status.substr(line_start, line_end - line_start);
    if (line.starts_with(kKey)) {
      const std::string_view value = common::trim(line.substr(kKey.size()));
      if (value.empty())
        return std::nullopt;
      return std::string(value);
    }
    line_start = line_end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> process_state(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::stringstream text;
  text << file.rdbuf();
  return state_from_proc_status(text.str());
}

}  // namespace ddprun::agent
