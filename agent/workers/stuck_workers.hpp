#pragma once
// Workers SIGKILL did not end. A SIGKILLed process dies as soon as it leaves the kernel; one in
// uninterruptible sleep (D state: wedged on a GPU, a NIC, a file system) does not, and cannot be
// reaped. So after its SIGKILL the agent waits at most a limit
// (TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT) for each worker, and then abandons those still
// there: it reports them, never signals or waits for them again, and the group counts as
// stopped, so the round goes on (restart or exit) as after any failure. Pure: the time is a
// value.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/workers/worker_record.hpp"
#include "common/seconds.hpp"

namespace ddprun::agent {

// Whether the agent waits for `worker` to be reaped after its SIGKILL: killed, neither reaped
// nor abandoned.
bool waited_for_after_kill(const WorkerRecord& worker);

// Whether the agent gives up on `worker` at `now`: SIGKILLed at least `limit` ago, and neither
// reaped nor abandoned already.
bool stuck_after_kill(const WorkerRecord& worker, WorkerClock::time_point now,
                      WorkerClock::duration limit);

// When the next SIGKILLed worker that is still waited for becomes stuck; nullopt when none is.
std::optional<WorkerClock::time_point> next_stuck_deadline(const std::vector<WorkerRecord>& workers,
                                                           WorkerClock::duration limit);

// A worker the agent gave up on, as it reports it.
struct AbandonedWorker {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  common::Seconds since_kill{0};
  std::string state;  // /proc/PID/status's, e.g. "D (disk sleep)"; "unknown" when unreadable
};

// The agent's one stderr line for it (without "\n"): who, since when, in what state, and that
// the host may need recycling.
std::string abandoned_worker_message(const AbandonedWorker& worker);

}  // namespace ddprun::agent
