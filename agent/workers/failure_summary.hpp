#pragma once
// torchrun 2.13's ChildFailedError table (reference torchrun.md section 4.5), built from the
// job-wide failure list so every node prints the same root cause. Pure.

#include <string>
#include <vector>

#include "agent/base/agent_config.hpp"
#include "agent/base/round_types.hpp"

namespace ddprun::agent {

// The name the table's title shows, as torchrun's _get_entrypoint_name gives it: the entry
// point as the user wrote it (the script path, the module, the program; "train" for the
// bundled trainer), not only its file name.
std::string failure_title_name(const WorkerSpec& workers);

// failures: job-wide, the root cause (earliest) first, as job_failures() returns them.
// title_name: failure_title_name(workers); the title is "<name> FAILED". As in torchrun, every
// failure is listed, numbered in rank order; the root cause is shown in its own section and
// "Failures:" lists the others (<NO_OTHER_FAILURES> when there are none).
std::string format_failure_summary(const std::string& title_name,
                                   const std::vector<WorkerFailure>& failures);

// "2026-12-02_17:36:38" in local time, torchrun's timestamp_isoformat().
std::string format_failure_time(UnixTime time);

}  // namespace ddprun::agent
