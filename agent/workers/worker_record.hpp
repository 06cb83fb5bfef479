#pragma once
// What the agent knows of one worker of its group: who it is, and how it ended or was given up.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "agent/workers/worker_exit.hpp"

namespace ddprun::agent {

using WorkerClock = std::chrono::steady_clock;

struct WorkerRecord {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  std::string error_file;
  WorkerClock::time_point started_at{};  // when it was forked
  std::optional<WorkerExit> exit;        // set once reaped
  double exit_time_s = 0;                // unix seconds when the exit was observed
  bool stopped_by_agent = false;         // ended by the agent's stop (see WorkerGroup)
  // The first SIGKILL sent while it still ran, and whether the agent then gave up on it: a
  // worker SIGKILL cannot end (agent/workers/stuck_workers.hpp) is never signalled or waited
  // for again.
  std::optional<WorkerClock::time_point> killed_at;
  bool abandoned = false;
};

}  // namespace ddprun::agent
