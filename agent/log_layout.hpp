#pragma once
// Where each worker's streams and error file go: torchrun's layout
// <log_dir>/<run_id>_<random>/attempt_<restart>/<local_rank>/{stdout.log,stderr.log,error.json}
// with --redirects, --tee and --local_ranks_filter. plan_worker_logs is pure; LogDirectory
// creates the directories.

#include <optional>
#include <string>

#include "launcher/launch_config.hpp"

namespace ddprun::agent {

struct StreamPlan {
  bool to_console = true;  // through the agent, prefixed
  std::string file;        // empty: no file
};

struct WorkerLogPlan {
  StreamPlan out;
  StreamPlan err;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE ("" when file logging is disabled)
};

inline constexpr int kStdOut = 1;  // torchrun's Std bitmask
inline constexpr int kStdErr = 2;

// attempt_dir: the attempt directory, or "" when file logging is disabled (--log_dir /dev/null).
WorkerLogPlan plan_worker_logs(const launcher::LaunchConfig& config, const std::string& attempt_dir,
                               int local_rank);

class LogDirectory {
 public:
  // log_dir: --log_dir, or nullopt for a fresh /tmp/torchelastic_XXXXXXXX as torchrun does.
  explicit LogDirectory(std::optional<std::string> log_dir);

  // Creates <base>/<run_id>_<random> on first use, then empties and recreates
  // attempt_<restart>/<local_rank>/ for every local rank. Returns the attempt directory, or ""
  // when logging is disabled. Throws std::runtime_error naming the path on failure.
  std::string prepare_attempt(const std::string& run_id, int restart_count, int nproc_per_node);

 private:
  std::optional<std::string> requested_;
  std::string run_dir_;
  bool disabled_ = false;
};

}  // namespace ddprun::agent
