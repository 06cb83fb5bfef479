#pragma once
// The facts plan_stack_capture needs, read from the system: which stack tools exist and
// whether a worker is stopped. Small and impure on purpose, so the planner stays pure.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/base/watched_worker.hpp"
#include "agent/stacks/stack_capture_plan.hpp"
#include "agent/workers/worker_env.hpp"

namespace ddprun::agent {

// py-spy from python_bin_dirs first (the bin/ of the worker's interpreter as its command names
// it, e.g. a venv's, without resolving symlinks), then from env's PATH; eu-stack and gdb from
// env's PATH. Executable regular files only.
// An executable regular file `name` in one of env's PATH folders (absolute ones only).
std::optional<std::string> find_on_path(const EnvMap& env, const std::string& name);

StackTools locate_stack_tools(const EnvMap& env, const std::vector<std::string>& python_bin_dirs);

// True when /proc/<pid>/stat shows a stop (T: SIGSTOP and friends, t: traced). False when the
// process runs, sleeps, or is gone.
bool process_is_stopped(pid_t pid);

// The target for one worker, with its current stop state.
StackTarget probe_stack_target(const WatchedWorker& worker);

}  // namespace ddprun::agent
