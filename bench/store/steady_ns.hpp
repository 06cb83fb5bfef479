#pragma once
// Time as plain nanoseconds of the steady clock, cheap enough to read per reply.

#include <chrono>
#include <cstdint>
#include <thread>

namespace ddprun::bench::store {

inline std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void sleep_until_ns(std::int64_t deadline_ns) {
  std::this_thread::sleep_until(
      std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns)));
}

}  // namespace ddprun::bench::store
