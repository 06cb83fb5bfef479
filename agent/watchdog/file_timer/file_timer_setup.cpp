#include "agent/watchdog/file_timer/file_timer_setup.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "common/random.hpp"

namespace ddprun::agent {

namespace {

bool usable_directory(const std::string& path) {
  struct stat info{};
  return !path.empty() && ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) &&
         ::access(path.c_str(), W_OK | X_OK) == 0;
}

// Python's tempfile.gettempdir(): the first candidate it can write to, made absolute.
std::string python_temp_dir(const EnvMap& env) {
  std::vector<std::string> candidates;
  for (const char* name : {"TMPDIR", "TEMP", "TMP"}) {
    if (auto it = env.find(name); it != env.end())
      candidates.push_back(it->second);
  }
  for (const char* fixed : {"/tmp", "/var/tmp", "/usr/tmp"})
    candidates.emplace_back(fixed);
  for (const std::string& candidate : candidates) {
    if (usable_directory(candidate))
      return std::filesystem::absolute(candidate).lexically_normal().string();
  }
  return std::filesystem::current_path().string();
}

}  // namespace

FileTimerSetup decide_file_timer_setup(const EnvMap& agent_env, const std::string& default_path) {
  FileTimerSetup setup;
  if (auto it = agent_env.find(kTimerFileEnv); it != agent_env.end())
    setup.path = it->second;
  auto enabled = agent_env.find(kEnableFileTimerEnv);
  if (enabled != agent_env.end() && enabled->second == "1") {
    setup.serve = true;
    if (!setup.path)
      setup.path = default_path;
  }
  return setup;
}

std::string default_file_timer_path(const EnvMap& agent_env) {
  return (std::filesystem::path(python_temp_dir(agent_env)) /
          ("watchdog_timer_" + common::random_uuid4()))
      .string();
}

void add_file_timer_env(EnvMap& worker_env, const FileTimerSetup& setup) {
  if (setup.path)
    worker_env[kTimerFileEnv] = *setup.path;
}

}  // namespace ddprun::agent
