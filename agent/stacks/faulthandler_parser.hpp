#pragma once
// Reads Python's faulthandler dump out of a worker's stderr: the route to Python frames that
// needs nothing installed (no py-spy). With PYTHONFAULTHANDLER set, a Python process that gets
// SIGABRT writes every thread's traceback to its stderr before it dies:
//   Fatal Python error: Aborted
//
//   Thread 0x00007f... (most recent call first):
//     File "/usr/lib/python3.11/threading.py", line 320 in wait
//   Current thread 0x00007f... (most recent call first):
//     File "/job/train.py", line 4 in wait_forever
//     File "/job/train.py", line 9 in <module>
// Pure and tolerant, as stack_trace_parser.hpp: what cannot be read is skipped.

#include <cstddef>
#include <string_view>
#include <vector>

#include "agent/stacks/stack_trace_parser.hpp"

namespace ddprun::agent {

// The dump faulthandler wrote last: from its last "Fatal Python error: " line to the end (a
// process dies after it; an earlier one belongs to an earlier abort), at most max_bytes of it.
// Empty when there is none.
std::string_view last_faulthandler_dump(std::string_view stderr_text, std::size_t max_bytes);

// The main thread's frames, innermost first: the thread whose outermost frame is a module's
// top level ("<module>"; other threads start in threading.py), else the current thread, else
// the first. Locations are "<file>:<line>".
std::vector<StackFrame> parse_faulthandler_main_thread(std::string_view dump);

}  // namespace ddprun::agent
