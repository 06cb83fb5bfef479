#pragma once
// Writes snapshots on a thread of its own, so that a step pays only for copying the state to host
// memory (make_snapshot with host copies); serialising, the fsyncs and the renames happen beside
// the training. On an accelerator the thread first waits for the copies queued on a side stream
// (SnapshotParts::wait_for_copies). One write at a time: the trainer asks busy() and skips (step
// cadence) or waits (epoch end, preemption, the last epoch) while one is in flight. A write is
// atomic as before (snapshot_io.hpp, atomic_file.hpp): a SIGKILL at any instant leaves every
// snapshot file whole.
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "resume_record.hpp"
#include "snapshot_state.hpp"

namespace ddprun::train {

struct SnapshotJob {
  std::string path;
  int64_t keep = 2;     // trainer_config.keep_snapshots (snapshot_generations.hpp)
  SnapshotParts parts;  // host copies: nothing else refers to them
  TrainingPosition position;
};

struct SnapshotWritten {
  TrainingPosition position;
  double write_seconds = 0.0;
  std::string error;  // empty: written; else what failed, naming the file
};

class SnapshotWriter {
 public:
  SnapshotWriter();
  // Finishes the write in flight (never leaves a promised snapshot unwritten), then stops.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  bool busy() const;
  // Hands a snapshot over; waits first if one is still being written.
  void submit(SnapshotJob job);
  // Returns once no write is in flight.
  void wait_idle();
  // The write that ended since the last call, if any.
  std::optional<SnapshotWritten> take_finished();

 private:
  void run(const std::stop_token& stop);

  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  std::optional<SnapshotJob> job_;  // handed over, not yet finished
  std::optional<SnapshotWritten> finished_;
  std::jthread thread_;  // last: starts once the members above exist
};

}  // namespace ddprun::train
