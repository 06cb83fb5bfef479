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

void HealthBoard::add_event(std::string line) {
  const std::lock_guard lock(events_mutex_);
  if (events_.size() == kRecentEvents)
    events_.pop_front();
  events_.push_back(std::move(line));
}

std::deque<std::string> HealthBoard::events_or(const std::deque<std::string>& fallback) const {
  const std::unique_lock lock(events_mutex_, std::try_to_lock);
  return lock.owns_lock() ? events_ : fallback;
}

void HealthBoard::publish_peers(std::vector<PeerRecord> peers) {
  const std::lock_guard lock(peers_mutex_);
  peers_ = std::move(peers);
}

void HealthBoard::publish_stacks(PageStacksState state) {
  const std::lock_guard lock(stacks_mutex_);
  stacks_ = std::move(state);
}

PageStacksState HealthBoard::stacks_or(const PageStacksState& fallback) const {
  const std::unique_lock lock(stacks_mutex_, std::try_to_lock);
  return lock.owns_lock() ? stacks_ : fallback;
}

bool HealthBoard::viewed_within(Clock::duration lease, Clock::time_point now) const {
  // now - lease, not now - last view: "never" is the clock's minimum, and the difference from it
  // overflows.
  const Clock::time_point viewed(Clock::duration(viewed_ticks_.load(std::memory_order_relaxed)));
  return viewed > now - lease;
}

void HealthBoard::note_viewed() {
  viewed_ticks_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

std::vector<PeerRecord> HealthBoard::peers_or(const std::vector<PeerRecord>& fallback) const {
  const std::unique_lock lock(peers_mutex_, std::try_to_lock);
  return lock.owns_lock() ? peers_ : fallback;
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
