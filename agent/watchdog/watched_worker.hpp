#pragma once
// One local worker as the hang watchdogs see it: its ranks (for reports) and its pid (the key
// of torchrun's file-timer requests, and what gets signalled). A plain value type.

#include <sys/types.h>

namespace ddprun::agent {

struct WatchedWorker {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
};

}  // namespace ddprun::agent
