#pragma once
// When a snapshot is due inside an epoch (trainer_config.save_every_steps, save_every_seconds).
// Pure: the caller brings the step count and the time since the last snapshot.
#include <cstdint>

namespace ddprun::train {

struct SnapshotCadence {
  int64_t every_steps = 0;     // 0: off
  double every_seconds = 0.0;  // 0: off
};

// After global step `global_step` (counted from the run's first epoch, so that a resumed run
// keeps the same multiples), `seconds` after the last snapshot was taken.
inline bool step_snapshot_due(const SnapshotCadence& cadence, int64_t global_step, double seconds) {
  return (cadence.every_steps > 0 && global_step % cadence.every_steps == 0) ||
         (cadence.every_seconds > 0.0 && seconds >= cadence.every_seconds);
}

}  // namespace ddprun::train
