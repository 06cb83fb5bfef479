#include "agent/watchdog/progress/progress_watch.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddprun::agent {

ProgressWatch::ProgressWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {
  if (timeout_ <= std::chrono::milliseconds::zero())
    throw std::invalid_argument("the progress watchdog timeout must be positive");
}

void ProgressWatch::start_group(const std::vector<WatchedWorker>& workers) {
  entries_.clear();
  for (const WatchedWorker& worker : workers)
    entries_.push_back(Entry{worker, std::nullopt, false});
}

ProgressWatch::Entry* ProgressWatch::find(int local_rank) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [local_rank](const Entry& entry) {
    return entry.worker.local_rank == local_rank;
  });
  return it == entries_.end() ? nullptr : &*it;
}

const ProgressWatch::Entry* ProgressWatch::find(int local_rank) const {
  auto it = std::find_if(entries_.begin(), entries_.end(), [local_rank](const Entry& entry) {
    return entry.worker.local_rank == local_rank;
  });
  return it == entries_.end() ? nullptr : &*it;
}

void ProgressWatch::on_heartbeat(int local_rank, TimePoint now) {
  if (Entry* entry = find(local_rank)) {
    // Beats drained late can carry an older time than one already seen: never move backwards.
    if (!entry->last_beat || now > *entry->last_beat)
      entry->last_beat = now;
    entry->reported = false;
  }
}

void ProgressWatch::forget_worker(int local_rank) {
  std::erase_if(entries_,
                [local_rank](const Entry& entry) { return entry.worker.local_rank == local_rank; });
}

std::vector<HungWorker> ProgressWatch::take_hung(TimePoint now) {
  std::vector<HungWorker> hung;
  for (Entry& entry : entries_) {
    if (!entry.last_beat || entry.reported || now < *entry.last_beat + timeout_)
      continue;
    entry.reported = true;
    hung.push_back(HungWorker{entry.worker, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                now - *entry.last_beat)});
  }
  std::sort(hung.begin(), hung.end(), [](const HungWorker& a, const HungWorker& b) {
    return a.worker.global_rank < b.worker.global_rank;
  });
  return hung;
}

std::optional<ProgressWatch::TimePoint> ProgressWatch::next_deadline() const {
  std::optional<TimePoint> earliest;
  for (const Entry& entry : entries_) {
    if (!entry.last_beat || entry.reported)
      continue;
    const TimePoint due = *entry.last_beat + timeout_;
    if (!earliest || due < *earliest)
      earliest = due;
  }
  return earliest;
}

bool ProgressWatch::armed(int local_rank) const {
  const Entry* entry = find(local_rank);
  return entry != nullptr && entry->last_beat.has_value();
}

}  // namespace ddprun::agent
