#pragma once
// When global rank 0 snapshots, and what it says about it: every save_every epochs (minGPT-ddp's
// cadence), every save_every_steps steps and/or save_every_seconds seconds inside an epoch, on
// preemption and after the last epoch. The step pays for the copy of the state to host memory
// only (on an accelerator, for queueing it: host_staging.hpp); the SnapshotWriter's thread
// writes it. A step snapshot due while the last one is still
// being written is skipped (said in the log: the next one comes soon); epoch, preemption and
// final snapshots wait for it. A write that fails stops the run, as a synchronous one did.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "elapsed.hpp"
#include "host_staging.hpp"
#include "resume_record.hpp"
#include "snapshot_cadence.hpp"
#include "snapshot_io.hpp"
#include "snapshot_state.hpp"
#include "snapshot_writer.hpp"
#include "train_config.hpp"

namespace ddprun::train {

class SnapshotKeeper {
 public:
  enum class Kind {
    kStep,   // skipped while a write is in flight
    kEpoch,  // waits for the write in flight, then goes on while it is written
    kLast,   // preemption or the last epoch: returns once it is on disk
  };
  // Copies the state into the staging's host buffers (make_snapshot).
  using Capture = std::function<SnapshotParts(const TrainingPosition&, HostStaging&)>;
  // `say` prints a line for the user, `record` one JSON line for the metrics file.
  SnapshotKeeper(const TrainerConfig& config, Capture capture,
                 std::function<void(const std::string&)> say,
                 std::function<void(const std::string&)> record);

  SnapshotCadence cadence() const { return cadence_; }
  double seconds_since_last() const;
  void take(const TrainingPosition& at, Kind kind);
  // Call before the optimizer changes the state in place: on an accelerator, the copies of the
  // last snapshot may still be in flight (host_staging.hpp).
  void before_update() { staging_.before_update(); }
  // Says what the writer finished since the last call; throws SnapshotError for a failed write.
  void report_finished();

 private:
  void report(const SnapshotWritten& written);

  std::string path_;
  int64_t keep_;
  SnapshotCadence cadence_;
  Capture capture_;
  std::function<void(const std::string&)> say_;
  std::function<void(const std::string&)> record_;
  Clock::time_point last_taken_ = Clock::now();
  double last_stall_seconds_ = 0.0;
  HostStaging staging_;    // reused only once the writer is idle (take)
  SnapshotWriter writer_;  // last: its destructor finishes a write that uses the members above
};

// Resuming: the newest usable snapshot among snapshot_path and its older generations
// (snapshot_generations.hpp). A damaged or cut-short file is named in a warning (`warn`) and the
// one before it tried. nullopt when there is none; throws SnapshotError naming each file and why
// when none is usable. `restore` loads one into the model (throwing SnapshotError when it does
// not fit, changing nothing).
struct ResumedSnapshot {
  std::string path;
  RestoredSnapshot restored;
};
std::optional<ResumedSnapshot> restore_newest_usable(
    const std::string& snapshot_path,
    const std::function<RestoredSnapshot(const SnapshotFile&, const std::string&)>& restore,
    const std::function<void(const std::string&)>& warn);

}  // namespace ddprun::train
