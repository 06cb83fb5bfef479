#pragma once
// CPU time a process has used, all its threads together, from /proc/<pid>/stat
// (utime + stime, in clock ticks of 1/sysconf(_SC_CLK_TCK) s, usually 10 ms).

#include <sys/types.h>

#include <optional>

namespace ddprun::bench::store {

// User plus system seconds of `pid` so far; nullopt when it cannot be read (the process is gone).
std::optional<double> process_cpu_seconds(pid_t pid);

}  // namespace ddprun::bench::store
