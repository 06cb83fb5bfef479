#pragma once
// What rank 0 tells people: a progress line every N steps and a summary per epoch, and the same
// numbers as one JSON object per line for machines. Pure formatting.
#include <cstdint>
#include <optional>
#include <string>

namespace ddprun::train {

struct ProgressSample {
  int64_t epoch = 0;  // 1-based
  int64_t max_epochs = 0;
  int64_t step = 0;  // 1-based step within the epoch
  int64_t steps_in_epoch = 0;
  int64_t global_step = 0;  // steps since the run (not the job) started
  double train_loss = 0.0;  // averaged over ranks
  std::optional<double> eval_loss;
  double tokens_per_second = 0.0;  // all ranks together
  double elapsed_seconds = 0.0;
  double eta_seconds = 0.0;
  // Epoch summaries: this rank's peak memory so far ("GPU": allocated on the device; "RSS").
  int64_t peak_memory_bytes = 0;
  std::string peak_memory_kind;
};

std::string format_duration(double seconds);  // h:mm:ss or m:ss
std::string progress_line(const ProgressSample& sample);
std::string epoch_summary_line(const ProgressSample& sample);
// kind is "step" or "epoch".
std::string metrics_json_line(const ProgressSample& sample, const std::string& kind);

// A snapshot write, for the metrics file.
std::string snapshot_json_line(int64_t finished_epoch, int64_t steps_into_epoch, double seconds);

// Loading the snapshot at start, for the metrics file.
std::string resume_json_line(int64_t finished_epoch, int64_t steps_into_epoch, double seconds);

// Seconds left, from the mean pace so far (0 when nothing has been measured).
double estimate_eta(double elapsed_seconds, int64_t steps_done, int64_t steps_left);

}  // namespace ddprun::train
