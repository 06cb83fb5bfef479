#pragma once
// The environment contract of torchrun's file-timer watchdog (LocalElasticAgent.
// _setup_local_watchdog, PyTorch 2.13), run at every worker-group start:
// - the agent's own environment decides; there is no command-line flag;
// - TORCHELASTIC_ENABLE_FILE_TIMER exactly "1" starts a server on TORCHELASTIC_TIMER_FILE, or
//   on "<tempfile.gettempdir()>/watchdog_timer_<uuid4>" (a new uuid per start) when unset;
// - whenever a path is known, enabled or not, each worker gets TORCHELASTIC_TIMER_FILE=<path>
//   (so with the feature off and the path set, workers get the path and no server listens:
//   FileTimerClient then fails with BrokenPipeError, as under torchrun).

#include <optional>
#include <string>

#include "agent/workers/worker_env.hpp"

namespace ddprun::agent {

inline constexpr const char* kEnableFileTimerEnv = "TORCHELASTIC_ENABLE_FILE_TIMER";
inline constexpr const char* kTimerFileEnv = "TORCHELASTIC_TIMER_FILE";

struct FileTimerSetup {
  bool serve = false;               // construct a FileTimerServer on *path
  std::optional<std::string> path;  // exported to every worker when set
};

// Pure. default_path is used only when the feature is on and the agent's env names no path.
FileTimerSetup decide_file_timer_setup(const EnvMap& agent_env, const std::string& default_path);

// "<tempfile.gettempdir()>/watchdog_timer_<uuid4>" with a fresh uuid: the first usable
// directory of $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp, else the current directory.
std::string default_file_timer_path(const EnvMap& agent_env);

// Adds TORCHELASTIC_TIMER_FILE to one worker's environment when setup has a path.
void add_file_timer_env(EnvMap& worker_env, const FileTimerSetup& setup);

}  // namespace ddprun::agent
