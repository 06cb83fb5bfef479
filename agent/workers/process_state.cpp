#include "agent/workers/process_state.hpp"

#include <dirent.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "common/text.hpp"

namespace ddprun::agent {

std::optional<std::string> state_from_proc_status(std::string_view status) {
  constexpr std::string_view kKey = "State:";
  common::Lines lines(status);
  while (const auto line = lines.next()) {
    if (line->starts_with(kKey)) {
      const std::string_view value = common::trim(line->substr(kKey.size()));
      if (value.empty())
        return std::nullopt;
      return std::string(value);
    }
  }
  return std::nullopt;
}

std::optional<std::string> process_state(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::stringstream text;
  text << file.rdbuf();
  return state_from_proc_status(text.str());
}

std::optional<char> state_from_proc_stat(std::string_view stat) {
  const std::size_t name_end = stat.rfind(')');
  if (name_end == std::string_view::npos || name_end + 2 >= stat.size() ||
      stat[name_end + 1] != ' ')
    return std::nullopt;
  return stat[name_end + 2];
}

bool has_runnable_thread(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(tasks.c_str()), ::closedir);
  if (!dir)
    return false;
  while (const dirent* entry = ::readdir(dir.get())) {
    if (entry->d_name[0] == '.')
      continue;
    std::ifstream file(tasks + "/" + entry->d_name + "/stat");
    std::string stat;
    std::getline(file, stat);
    if (state_from_proc_stat(stat) == 'R')
      return true;
  }
  return false;
}

}  // namespace ddprun::agent
