#include "agent/health/health_board.hpp"

#include <utility>

namespace ddprun::agent {

void HealthBoard::record_progress() {
  progress_ticks_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  progress_unix_s_.store(std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count(),
                         std::memory_order_relaxed);
}

void HealthBoard::publish(HealthState state) {
  {
    const std::lock_guard lock(mutex_);
    state_ = std::move(state);
  }
  record_progress();
}

HealthBoard::Clock::time_point HealthBoard::last_progress() const {
  return Clock::time_point(Clock::duration(progress_ticks_.load(std::memory_order_relaxed)));
}

int64_t HealthBoard::last_progress_unix_s() const {
  return progress_unix_s_.load(std::memory_order_relaxed);
}

HealthState HealthBoard::state_or(const HealthState& fallback) const {
  const std::unique_lock lock(mutex_, std::try_to_lock);
  return lock.owns_lock() ? state_ : fallback;
}

}  // namespace ddprun::agent
