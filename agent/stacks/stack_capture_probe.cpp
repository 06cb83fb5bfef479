#include "agent/stacks/stack_capture_probe.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>

namespace ddprun::agent {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat info{};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::vector<std::string> path_dirs(const EnvMap& env) {
  auto it = env.find("PATH");
  const std::string path = it == env.end() ? "/usr/local/bin:/usr/bin:/bin" : it->second;
  std::vector<std::string> dirs;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos)
      end = path.size();
    if (end > start)  // an empty entry (the current directory) is no place to find tools
      dirs.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

std::optional<std::string> find_in(const std::vector<std::string>& dirs, const std::string& name) {
  for (const std::string& dir : dirs) {
    if (dir.empty() || dir.front() != '/')
      continue;  // absolute paths only: the runner execs without a search
    std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate))
      return candidate;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_on_path(const EnvMap& env, const std::string& name) {
  return find_in(path_dirs(env), name);
}

StackTools locate_stack_tools(const EnvMap& env, const std::vector<std::string>& python_bin_dirs) {
  const std::vector<std::string> on_path = path_dirs(env);
  std::vector<std::string> py_spy_dirs = python_bin_dirs;
  py_spy_dirs.insert(py_spy_dirs.end(), on_path.begin(), on_path.end());
  StackTools tools;
  tools.py_spy = find_in(py_spy_dirs, "py-spy");
  tools.eu_stack = find_in(on_path, "eu-stack");
  tools.gdb = find_in(on_path, "gdb");
  return tools;
}

bool process_is_stopped(pid_t pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat_file, text))
    return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size())
    return false;
  const char state = text[close_paren + 2];
  return state == 'T' || state == 't';
}

StackTarget probe_stack_target(const WatchedWorker& worker) {
  return StackTarget{worker.global_rank, worker.local_rank, worker.pid,
                     process_is_stopped(worker.pid)};
}

}  // namespace ddprun::agent
