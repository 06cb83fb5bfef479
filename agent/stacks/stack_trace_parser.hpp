#pragma once
// Reads the main thread's frames out of captured stack dumps: py-spy's `dump` text, eu-stack's
// and gdb's `thread apply all bt`, and whole stack files as StackCaptureRunner writes them.
// Pure and tolerant: a dump is a tool's free-form text (cut off by a timeout, or an error
// message), so what cannot be read is skipped, never an error. Innermost frame first.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::agent {

struct StackFrame {
  std::string function;  // "??" when the tool did not know it
  std::string location;  // "file.py:12", "file.c:48", a library, or empty
  bool python = false;   // a Python frame (location in a .py file or a frozen module)

  bool operator==(const StackFrame&) const = default;
};

// The main thread: the one named "MainThread" or whose thread id is pid, else the first.
std::vector<StackFrame> parse_py_spy_main_thread(std::string_view dump, pid_t pid);
// eu-stack (-s -m optional) or gdb output; the main thread is the one whose TID/LWP is pid.
std::vector<StackFrame> parse_native_main_thread(std::string_view dump, pid_t pid);

struct CapturedStacks {
  std::vector<StackFrame> python;  // from the py-spy section, if any
  std::vector<StackFrame> native;  // from the eu-stack or gdb section, if any
};
// A stack file of StackCaptureRunner (sections opened by kStackSectionMarker lines).
CapturedStacks parse_stack_file(std::string_view file_text, pid_t pid);

// What a report shows: up to max_frames frames; with Python frames, the innermost frame (where
// the thread waits, often native) followed by the Python frames; else the native frames.
std::vector<StackFrame> summary_frames(const CapturedStacks& stacks, std::size_t max_frames);

}  // namespace ddprun::agent
