#pragma once
// torchrun's ChildFailedError table (reference torchrun.md section 4.5), built from the
// job-wide failure list so every node prints the same root cause. Pure.

#include <string>
#include <vector>

#include "agent/round_types.hpp"

namespace ddprun::agent {

// failures: job-wide, the root cause (earliest) first, as job_failures() returns them.
// title_name: the entry point's base name ("train.py"); the title is "<name> FAILED".
std::string format_failure_summary(const std::string& title_name,
                                   const std::vector<WorkerFailure>& failures);

// "2026-12-02_17:36:38" in local time, torchrun's timestamp_isoformat().
std::string format_failure_time(double epoch_seconds);

}  // namespace ddprun::agent
