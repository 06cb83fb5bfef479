#pragma once
// A process's scheduling state as the kernel names it in /proc/PID/status: "R (running)",
// "S (sleeping)", "D (disk sleep)" (uninterruptible), "T (stopped)", "t (tracing stop)",
// "Z (zombie)", ...: what a person reading the agent's report recognises.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace ddprun::agent {

// The value of the "State:" line of a /proc/PID/status text; nullopt when it has none.
std::optional<std::string> state_from_proc_status(std::string_view status);

// pid's state now; nullopt when the process is gone (or /proc cannot be read).
std::optional<std::string> process_state(pid_t pid);

// The state letter of a /proc/PID/task/TID/stat text ("R", "S", "D", ...): the field after the
// command name, which may itself hold blanks and parentheses; nullopt when malformed.
std::optional<char> state_from_proc_stat(std::string_view stat);

// Whether any thread of pid is runnable ('R') now: a worker that is computing, or woken and on
// its way somewhere (out, perhaps). False when it is gone or /proc cannot be read.
bool has_runnable_thread(pid_t pid);

}  // namespace ddprun::agent
