#pragma once
// Time since a moment, in seconds, on the monotonic clock: what the trainer's lines and metrics
// report (steps, loads, snapshot stalls and writes).
#include <chrono>

namespace ddprun::train {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace ddprun::train
