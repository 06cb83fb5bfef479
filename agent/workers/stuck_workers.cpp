#include "agent/workers/stuck_workers.hpp"

#include <algorithm>
#include <cstdio>

namespace ddprun::agent {

bool waited_for_after_kill(const WorkerRecord& worker) {
  return worker.killed_at && !worker.exit && !worker.abandoned;
}

bool stuck_after_kill(const WorkerRecord& worker, WorkerClock::time_point now,
                      WorkerClock::duration limit) {
  return waited_for_after_kill(worker) && now - *worker.killed_at >= limit;
}

std::optional<WorkerClock::time_point> next_stuck_deadline(const std::vector<WorkerRecord>& workers,
                                                           WorkerClock::duration limit) {
  std::optional<WorkerClock::time_point> next;
  for (const auto& worker : workers) {
    if (waited_for_after_kill(worker))
      next = std::min(next.value_or(WorkerClock::time_point::max()), *worker.killed_at + limit);
  }
  return next;
}

std::string abandoned_worker_message(const AbandonedWorker& worker) {
  char since[32];
  std::snprintf(since, sizeof since, "%.1f", worker.since_kill.count());
  return "ddprun: worker rank " + std::to_string(worker.global_rank) + " (local_rank " +
         std::to_string(worker.local_rank) + ", pid " + std::to_string(worker.pid) +
         ") did not exit " + since + " s after SIGKILL (state: " + worker.state +
         "); abandoned, the agent goes on without it. It may be in uninterruptible kernel sleep "
         "(e.g. wedged on a GPU or NIC); the host may need to be recycled.";
}

}  // namespace ddprun::agent
