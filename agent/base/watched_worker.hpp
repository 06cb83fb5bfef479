#pragma once
// One local worker as the hang watchdogs see it: its ranks (for reports) and its pid (the key
// of torchrun's file-timer requests, and what gets signalled), and where a Python traceback
// of it would go (python_traceback_fallback.hpp). A plain value type.

#include <sys/types.h>

#include <string>

namespace ddprun::agent {

struct WatchedWorker {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  bool python = false;            // a Python entry point (a script or -m), not a binary
  bool faulthandler = false;      // Python's faulthandler is on in it (PYTHONFAULTHANDLER)
  std::string stderr_file{};      // its stderr's log file (--redirects, --tee); "" when none
  bool stderr_discarded = false;  // a rank --local-ranks-filter hides, stderr not in a file
};

}  // namespace ddprun::agent
