#pragma once
// Which commands capture the stacks of hung workers, and where their output goes: a pure
// planner (the tools found and the targets' states are inputs; StackCaptureProbe finds them,
// StackCaptureRunner runs the plan).
//
// Per worker, in order (two tracers cannot attach to one process at once), output appended to
// <log_dir>/stacks/rank<global rank>.txt, each command's output between marker lines:
// - Python stacks: `py-spy dump --pid P --native` (Python and C frames interleaved); for a
//   stopped process (SIGSTOP) `py-spy dump --pid P --nonblocking`, because py-spy cannot
//   suspend a stopped process and --native needs that;
// - native stacks: `eu-stack -s -m -p P` (elfutils: tens of ms), else
//   `gdb -p P -batch -nx -ex 'thread apply all bt'` (seconds once LibTorch is loaded).
// Both read stopped processes and leave them stopped.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::agent {

// Each tool gets this long before it is killed (a dump takes well under a second; a tool that
// hangs must not hold up the restart).
inline constexpr std::chrono::milliseconds kDefaultStackToolTimeout{10'000};
// Marker lines in the stack files: "<marker>python stacks: <command>", "<marker>native stacks:
// <command>", and after each command "<marker>end: <how it ended>".
inline constexpr std::string_view kStackSectionMarker = "#### ddprun stack capture: ";

struct StackTools {  // absolute paths of the tools found
  std::optional<std::string> py_spy;
  std::optional<std::string> eu_stack;
  std::optional<std::string> gdb;
};

struct StackTarget {
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  bool stopped = false;  // in a stop (SIGSTOP, or traced): py-spy must read without suspending
};

enum class StackKind { kPython, kNative };

struct CaptureCommand {
  StackKind kind = StackKind::kNative;
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::chrono::milliseconds timeout = kDefaultStackToolTimeout;
};

struct TargetCapturePlan {
  StackTarget target;
  std::string output_path;
  std::vector<CaptureCommand> commands;  // run one after another; may be empty (no tools)
};

struct StackCapturePlan {
  std::string stacks_dir;  // <log_dir>/stacks
  std::vector<TargetCapturePlan> targets;
};

struct StackCaptureOptions {
  bool python = true;  // py-spy, when found
  bool native = true;  // eu-stack, else gdb, when found
  std::chrono::milliseconds tool_timeout = kDefaultStackToolTimeout;
};

StackCapturePlan plan_stack_capture(const std::vector<StackTarget>& targets,
                                    const std::string& log_dir, const StackTools& tools,
                                    const StackCaptureOptions& options = {});

// The marker line that opens a command's section (without '\n').
std::string stack_section_header(const CaptureCommand& command);

}  // namespace ddprun::agent
