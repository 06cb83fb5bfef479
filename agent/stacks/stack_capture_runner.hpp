#pragma once
// Runs a StackCapturePlan: every target's commands one after another (two tracers cannot attach
// to one process), targets in parallel, each command killed when its timeout passes. Shaped for
// an event loop: one descriptor to wait on, one deadline to arm, one advance(now) call.
//
// Tools run as child processes in their own process group (a timeout kills the group), with
// stdin from /dev/null, stdout and stderr appended to the target's stack file, the signal mask
// cleared and SIGPIPE at its default (the agent blocks and ignores signals; a tool must not
// inherit that), PR_SET_PDEATHSIG(SIGKILL), and DEBUGINFOD_URLS removed (no network lookups).
// Exits are observed through pidfds, so the agent's SIGCHLD handling is not involved, as long
// as it reaps only its workers' pids (waitpid(pid), never waitpid(-1)).
//
// Error policy: the constructor throws std::runtime_error when the stacks folder or an output
// file cannot be created; a command that cannot start is recorded and the next one runs.
// Threading: construct and use on the thread that lives as long as the agent (PDEATHSIG).

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/owned_fd.hpp"
#include "agent/stacks/stack_capture_plan.hpp"
#include "agent/stacks/stack_trace_parser.hpp"
#include "agent/workers/worker_env.hpp"

namespace ddprun::agent {

class StackCaptureRunner {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  enum class CommandEnd {
    kPending,     // not run yet, or running
    kExited,      // ran to its end (see wait_status)
    kTimedOut,    // killed at its timeout
    kNotStarted,  // fork or pidfd_open failed (see error)
    kCancelled,   // cancel() came first
  };
  struct CommandResult {
    CaptureCommand command;
    CommandEnd end = CommandEnd::kPending;
    int wait_status = 0;  // waitpid() status for kExited and kTimedOut
    std::string error;    // for kNotStarted
    bool succeeded() const;
  };
  struct TargetResult {
    StackTarget target;
    std::string output_path;
    std::vector<CommandResult> commands;
  };

  // Creates plan.stacks_dir and the output files (truncated) and starts the first command of
  // every target. tool_env: the environment for the tools (the agent's own).
  StackCaptureRunner(const StackCapturePlan& plan, const EnvMap& tool_env, TimePoint now);
  // cancel(): nothing outlives the runner.
  ~StackCaptureRunner();
  StackCaptureRunner(const StackCaptureRunner&) = delete;
  StackCaptureRunner& operator=(const StackCaptureRunner&) = delete;

  // Readable when a running command has exited (an epoll descriptor over the tools' pidfds).
  int fd() const { return epoll_.get(); }
  // Call when fd() is readable or next_deadline() has passed: reaps finished commands, kills
  // overdue ones, starts the next command of each target.
  void advance(TimePoint now);
  // The earliest timeout of a running command; nullopt when none is pending.
  std::optional<TimePoint> next_deadline() const;
  bool done() const;
  // Kills (SIGKILL) and reaps what still runs, and skips what has not started.
  void cancel();

  const std::vector<TargetResult>& results() const { return results_; }

 private:
  struct Running {
    pid_t pid = -1;
    OwnedFd pidfd;
    TimePoint deadline;
    bool killed = false;  // the timeout passed; waiting for the exit
  };
  struct TargetState {
    OwnedFd output;
    std::size_t next_command = 0;
    std::optional<Running> running;
  };

  void start_next(std::size_t index, TimePoint now);
  void record_end(std::size_t index, std::size_t command, CommandEnd end, int wait_status,
                  std::string error);
  void append(std::size_t index, const std::string& line);

  OwnedFd epoll_;
  OwnedFd dev_null_;
  std::vector<std::string> env_storage_;
  std::vector<char*> envp_;
  std::vector<TargetResult> results_;
  std::vector<TargetState> states_;
};

// A blocking run for tests and one-shot callers: waits for every command or until limit, then
// cancels the rest. Returns the results.
std::vector<StackCaptureRunner::TargetResult> capture_stacks(const StackCapturePlan& plan,
                                                             const EnvMap& tool_env,
                                                             std::chrono::milliseconds limit);

// Reads and parses one target's stack file (its first kMaxStackFileBytesParsed bytes).
inline constexpr std::size_t kMaxStackFileBytesParsed = 4 * 1024 * 1024;
CapturedStacks read_captured_stacks(const StackCaptureRunner::TargetResult& result);

}  // namespace ddprun::agent
