#pragma once
// The round machine's time: a point on the driver's monotonic clock, in the fractional seconds
// the configuration holds durations in, so that "now + a timeout" is exact as written. The
// machine never reads a clock; the driver hands it steady_clock's now, and tests and the model
// checker count seconds from the epoch.

#include <chrono>

#include "common/seconds.hpp"

namespace ddprun::rendezvous::round {

using MachineTime = std::chrono::time_point<std::chrono::steady_clock, common::Seconds>;

// The point this many seconds after the clock's epoch (tests and simulations start at 0).
constexpr MachineTime machine_time(double seconds_since_epoch) {
  return MachineTime{common::Seconds{seconds_since_epoch}};
}

}  // namespace ddprun::rendezvous::round
