#include "agent/watchdog/file_timer/timer_table.hpp"

#include <algorithm>
#include <iterator>

namespace ddprun::agent {

void TimerTable::start_group(std::vector<WatchedWorker> workers) {
  workers_ = std::move(workers);
  timers_.clear();
}

const WatchedWorker* TimerTable::find_worker(pid_t pid) const {
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [pid](const WatchedWorker& worker) { return worker.pid == pid; });
  return it == workers_.end() ? nullptr : &*it;
}

std::size_t TimerTable::timers_of(pid_t pid) const {
  auto first = timers_.lower_bound({pid, std::string()});
  auto last = timers_.lower_bound({pid + 1, std::string()});
  return static_cast<std::size_t>(std::distance(first, last));
}

TimerTable::Outcome TimerTable::apply(const FileTimerRequest& request) {
  if (find_worker(request.pid) == nullptr)
    return Outcome::kNotAWorker;
  auto key = std::make_pair(request.pid, request.scope_id);
  if (request.is_release())
    return timers_.erase(key) > 0 ? Outcome::kReleased : Outcome::kReleaseUnknown;
  auto existing = timers_.find(key);
  if (existing == timers_.end() && timers_of(request.pid) >= kMaxTimersPerWorker)
    return Outcome::kTooManyTimers;
  timers_.insert_or_assign(std::move(key), Timer{request.expiration_epoch_s, request.signal});
  return Outcome::kAcquired;
}

void TimerTable::forget_worker(pid_t pid) {
  std::erase_if(workers_, [pid](const WatchedWorker& worker) { return worker.pid == pid; });
  std::erase_if(timers_, [pid](const auto& entry) { return entry.first.first == pid; });
}

std::vector<TimerExpiry> TimerTable::take_expired(double now_epoch_s) {
  std::vector<TimerExpiry> expired;
  for (const WatchedWorker& worker : workers_) {
    auto first = timers_.lower_bound({worker.pid, std::string()});
    auto last = timers_.lower_bound({worker.pid + 1, std::string()});
    // This worker's expired timers in expiration order, as torchrun sorts them; the scope
    // breaks ties so the choice does not depend on the map's order.
    struct Due {
      double expiration_epoch_s;
      const std::string* scope_id;
      int signal;
    };
    std::vector<Due> due;
    for (auto it = first; it != last; ++it) {
      if (it->second.expiration_epoch_s <= now_epoch_s)
        due.push_back(Due{it->second.expiration_epoch_s, &it->first.second, it->second.signal});
    }
    if (due.empty())
      continue;
    std::sort(due.begin(), due.end(), [](const Due& a, const Due& b) {
      return a.expiration_epoch_s != b.expiration_epoch_s
                 ? a.expiration_epoch_s < b.expiration_epoch_s
                 : *a.scope_id < *b.scope_id;
    });
    auto decisive = std::find_if(due.begin(), due.end(), [](const Due& d) { return d.signal > 0; });
    if (decisive == due.end())
      decisive = due.begin();
    TimerExpiry expiry;
    expiry.worker = worker;
    expiry.scope_id = *decisive->scope_id;
    expiry.expiration_epoch_s = decisive->expiration_epoch_s;
    expiry.signal = decisive->signal;
    expiry.expired_timers = due.size();
    expired.push_back(std::move(expiry));
    timers_.erase(first, last);
  }
  std::sort(expired.begin(), expired.end(), [](const TimerExpiry& a, const TimerExpiry& b) {
    return a.worker.global_rank < b.worker.global_rank;
  });
  return expired;
}

std::optional<double> TimerTable::next_deadline_epoch_s() const {
  std::optional<double> earliest;
  for (const auto& [key, timer] : timers_) {
    if (!earliest || timer.expiration_epoch_s < *earliest)
      earliest = timer.expiration_epoch_s;
  }
  return earliest;
}

}  // namespace ddprun::agent
