#pragma once
// Where each worker's streams and error file go, as torchrun 2.x decides it
// (DefaultLogsSpecs.reify): torchrun's layout
// <log_dir>/<run_id>_<random>/attempt_<restart>/<local_rank>/{stdout.log,stderr.log,error.json}
// with --redirects, --tee, --local-ranks-filter and --duplicate-*-filters. plan_worker_logs is
// pure; LogDirectory creates the directories.
//
// Each stream takes one route:
//   inherit  the worker writes to the agent's own stdout/stderr, untouched (torchrun's default:
//            a terminal stays a terminal for the worker, isatty() is true)
//   discard  /dev/null: a rank --local-ranks-filter hides, whose stream is not redirected
//   file     the log file only: --redirects, or a hidden rank's --tee
//   tee      the log file, and through the agent to its console with the [role0]: prefix

#include <optional>
#include <string>
#include <vector>

#include "agent/base/agent_config.hpp"

namespace ddprun::agent {

enum class StreamRoute { kInherit, kDiscard, kFile, kTee };

struct StreamPlan {
  StreamRoute route = StreamRoute::kInherit;
  std::string file;  // kFile and kTee: the log file
  // kTee with --duplicate-*-filters: the attempt's filtered_stdout.log / filtered_stderr.log
  // (shared by every rank) and the strings a copied line contains. Empty: no copies.
  std::string duplicate_file;
  std::vector<std::string> duplicate_filters;
};

struct WorkerLogPlan {
  StreamPlan out;
  StreamPlan err;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE ("" when file logging is disabled)
};

inline constexpr int kStdOut = 1;  // torchrun's Std bitmask
inline constexpr int kStdErr = 2;

// attempt_dir: the attempt directory, or "" when file logging is disabled (--log_dir
// /dev/null): then --redirects and --tee have no file to write, and the streams stay on the
// console unprefixed, as in torchrun. --local-ranks-filter still hides ranks then (torchrun
// ignores it in that case).
WorkerLogPlan plan_worker_logs(const LogConfig& logs, const std::string& attempt_dir,
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
