#include "snapshot_keeper.hpp"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "elapsed.hpp"
#include "snapshot_generations.hpp"

namespace ddprun::train {
namespace {

std::string position_text(const TrainingPosition& at) {
  return "finished epoch " + std::to_string(at.finished_epoch) +
         (at.steps_into_epoch > 0
              ? ", " + std::to_string(at.steps_into_epoch) + " steps into the next"
              : std::string());
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", seconds);
  return text;
}

}  // namespace

SnapshotKeeper::SnapshotKeeper(const TrainerConfig& config, Capture capture,
                               std::function<void(const std::string&)> say,
                               std::function<void(const std::string&)> record)
    : path_(config.snapshot_path),
      keep_(config.keep_snapshots),
      cadence_{config.save_every_steps, config.save_every_seconds},
      capture_(std::move(capture)),
      say_(std::move(say)),
      record_(std::move(record)) {
  remove_stale_temporaries(path_);
}

double SnapshotKeeper::seconds_since_last() const {
  return seconds_since(last_taken_);
}

void SnapshotKeeper::take(const TrainingPosition& at, Kind kind) {
  report_finished();
  if (kind == Kind::kStep && writer_.busy()) {
    say_("snapshot: skipped at " + position_text(at) +
         ": the previous one is still being written (the next one is due soon)");
    record_(nlohmann::json{{"kind", "snapshot_skipped"},
                           {"finished_epoch", at.finished_epoch},
                           {"steps_into_epoch", at.steps_into_epoch}}
                .dump());
    return;
  }
  writer_.wait_idle();
  report_finished();
  const auto start = Clock::now();
  SnapshotJob job{path_, keep_, capture_(at, staging_), at};
  last_stall_seconds_ = seconds_since(start);
  last_taken_ = Clock::now();
  writer_.submit(std::move(job));
  if (kind == Kind::kLast) {
    writer_.wait_idle();
    report_finished();
  }
}

void SnapshotKeeper::report_finished() {
  if (auto written = writer_.take_finished()) {
    report(*written);
  }
}

void SnapshotKeeper::report(const SnapshotWritten& written) {
  if (!written.error.empty()) {
    throw SnapshotError(written.error);
  }
  say_("snapshot: wrote " + path_ + " (" + position_text(written.position) + ") in " +
       seconds_text(written.write_seconds) + " beside the training; the step paid " +
       seconds_text(last_stall_seconds_) + " for the copy");
  record_(nlohmann::json{{"kind", "snapshot"},
                         {"path", path_},
                         {"unix_time", unix_seconds_now()},
                         {"finished_epoch", written.position.finished_epoch},
                         {"steps_into_epoch", written.position.steps_into_epoch},
                         {"save_seconds", written.write_seconds},
                         {"stall_seconds", last_stall_seconds_}}
              .dump());
}

std::optional<ResumedSnapshot> restore_newest_usable(
    const std::string& snapshot_path,
    const std::function<RestoredSnapshot(const SnapshotFile&, const std::string&)>& restore,
    const std::function<void(const std::string&)>& warn) {
  const auto files = existing_generations(snapshot_path);
  std::string reasons;
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      return ResumedSnapshot{files[i], restore(read_snapshot_file(files[i]), files[i])};
    } catch (const SnapshotError& e) {
      reasons += std::string(reasons.empty() ? "" : "; ") + e.what();
      if (i + 1 < files.size()) {
        warn("warning: " + std::string(e.what()) + "; resuming from the one before it, " +
             files[i + 1]);
      }
    }
  }
  if (files.empty()) {
    return std::nullopt;
  }
  throw SnapshotError("no usable snapshot among " + std::to_string(files.size()) +
                      " file(s): " + reasons);
}

}  // namespace ddprun::train
