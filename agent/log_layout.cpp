#include "agent/log_layout.hpp"

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

bool selected_for_console(const launcher::LaunchConfig& config, int local_rank) {
  const auto& filter = config.local_ranks_filter;
  return filter.empty() || std::find(filter.begin(), filter.end(), local_rank) != filter.end();
}

StreamPlan plan_stream(int redirect_bits, int tee_bits, int bit, bool selected,
                       const std::string& rank_dir, const char* file_name) {
  StreamPlan plan;
  const bool to_file = ((redirect_bits | tee_bits) & bit) != 0;
  const bool redirected_only = (redirect_bits & bit) != 0 && (tee_bits & bit) == 0;
  plan.to_console = selected && !redirected_only;
  if (to_file)
    plan.file = rank_dir.empty() ? "/dev/null" : rank_dir + "/" + file_name;
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

WorkerLogPlan plan_worker_logs(const launcher::LaunchConfig& config, const std::string& attempt_dir,
                               int local_rank) {
  const std::string rank_dir =
      attempt_dir.empty() ? std::string() : attempt_dir + "/" + std::to_string(local_rank);
  const bool selected = selected_for_console(config, local_rank);
  const int redirect_bits = config.redirects.for_local_rank(local_rank);
  const int tee_bits = config.tee.for_local_rank(local_rank);
  WorkerLogPlan plan;
  plan.out = plan_stream(redirect_bits, tee_bits, kStdOut, selected, rank_dir, "stdout.log");
  plan.err = plan_stream(redirect_bits, tee_bits, kStdErr, selected, rank_dir, "stderr.log");
  plan.error_file = rank_dir.empty() ? std::string() : rank_dir + "/error.json";
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
