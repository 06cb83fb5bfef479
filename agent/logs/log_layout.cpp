#include "agent/logs/log_layout.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace ddprun::agent {

namespace fs = std::filesystem;

namespace {

bool selected_for_console(const LogConfig& logs, int local_rank) {
  const auto& filter = logs.local_ranks_filter;
  return filter.empty() || std::find(filter.begin(), filter.end(), local_rank) != filter.end();
}

struct StreamInputs {
  int redirect_bits = 0;
  int tee_bits = 0;
  bool selected = true;     // shown on the console (--local-ranks-filter)
  std::string attempt_dir;  // "" when file logging is disabled
  std::string rank_dir;
  const std::vector<std::string>* duplicate_filters = nullptr;
};

StreamPlan plan_stream(const StreamInputs& in, int bit, const char* file_name,
                       const char* duplicate_name) {
  StreamPlan plan;
  const bool to_file = ((in.redirect_bits | in.tee_bits) & bit) != 0;
  if (in.attempt_dir.empty() || !to_file) {
    plan.route = in.selected ? StreamRoute::kInherit : StreamRoute::kDiscard;
    return plan;
  }
  plan.file = in.rank_dir + "/" + file_name;
  const bool tee = (in.tee_bits & bit) != 0 && in.selected;
  plan.route = tee ? StreamRoute::kTee : StreamRoute::kFile;
  // torchrun copies matching lines from the streams it tails, i.e. the tee'd, shown ones.
  if (tee && !in.duplicate_filters->empty()) {
    plan.duplicate_file = in.attempt_dir + "/" + duplicate_name;
    plan.duplicate_filters = *in.duplicate_filters;
  }
  return plan;
}

std::string make_temp_dir(const std::string& templ) {
  std::vector<char> buffer(templ.begin(), templ.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw std::runtime_error("cannot create the log directory " + templ + ": " +
                             std::strerror(errno));
  }
  return buffer.data();
}

}  // namespace

WorkerLogPlan plan_worker_logs(const LogConfig& logs, const std::string& attempt_dir,
                               int local_rank) {
  StreamInputs in;
  in.redirect_bits = logs.redirects.for_local_rank(local_rank);
  in.tee_bits = logs.tee.for_local_rank(local_rank);
  in.selected = selected_for_console(logs, local_rank);
  in.attempt_dir = attempt_dir;
  in.rank_dir =
      attempt_dir.empty() ? std::string() : attempt_dir + "/" + std::to_string(local_rank);
  WorkerLogPlan plan;
  in.duplicate_filters = &logs.duplicate_stdout_filters;
  plan.out = plan_stream(in, kStdOut, "stdout.log", "filtered_stdout.log");
  in.duplicate_filters = &logs.duplicate_stderr_filters;
  plan.err = plan_stream(in, kStdErr, "stderr.log", "filtered_stderr.log");
  plan.error_file = in.rank_dir.empty() ? std::string() : in.rank_dir + "/error.json";
  return plan;
}

LogDirectory::LogDirectory(std::optional<std::string> log_dir) : requested_(std::move(log_dir)) {
  disabled_ = requested_ && *requested_ == "/dev/null";
}

std::string LogDirectory::prepare_attempt(const std::string& run_id, int restart_count,
                                          int nproc_per_node) {
  if (disabled_)
    return {};
  std::error_code error;
  if (run_dir_.empty()) {
    std::string base;
    if (requested_) {
      base = *requested_;
      fs::create_directories(base, error);
      if (error) {
        throw std::runtime_error("cannot create --log_dir " + base + ": " + error.message());
      }
    } else {
      base = make_temp_dir((fs::temp_directory_path() / "torchelastic_XXXXXXXX").string());
    }
    std::string safe_id = run_id;
    std::replace(safe_id.begin(), safe_id.end(), '/', '_');
    run_dir_ = make_temp_dir(base + "/" + safe_id + "_XXXXXXXX");
  }
  const std::string attempt = run_dir_ + "/attempt_" + std::to_string(restart_count);
  // torchrun empties the attempt directory first: a re-formed round with the same restart
  // count overwrites that attempt's logs.
  fs::remove_all(attempt, error);
  for (int local_rank = 0; local_rank < nproc_per_node; ++local_rank) {
    const std::string rank_dir = attempt + "/" + std::to_string(local_rank);
    fs::create_directories(rank_dir, error);
    if (error)
      throw std::runtime_error("cannot create " + rank_dir + ": " + error.message());
  }
  return attempt;
}

}  // namespace ddprun::agent
