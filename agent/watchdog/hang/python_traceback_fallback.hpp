#pragma once
// Python frames without py-spy: where py-spy is not found (next to the worker's python or on
// PATH), a hung Python worker's report would hold only the interpreter's C frames. The route
// that needs nothing installed: with a watchdog on, Python workers run with
// PYTHONFAULTHANDLER=1 (unless the job set it), and a hung one that is about to be SIGKILLed
// gets SIGABRT first, so Python's faulthandler writes every thread's traceback to its stderr as
// it dies; the agent then reads it back from the stderr log file into the stack file. Not for
// binaries (--no-python, the bundled trainer), stopped workers (they would not run the
// handler), nor a file timer that asked for another signal than SIGKILL (the job chose what
// its worker gets). The decisions and texts, pure; HangResponder does the signalling and I/O.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/watched_worker.hpp"
#include "agent/stacks/stack_trace_parser.hpp"
#include "agent/watchdog/hang/hang_report.hpp"

namespace ddprun::agent {

// How long an aborted worker has to write its traceback and die before it is SIGKILLed (a
// dump takes milliseconds; a worker in uninterruptible sleep never gets to it).
inline constexpr std::chrono::seconds kFaulthandlerExitLimit{5};
// What is read back from the end of the stderr log file, and kept of the dump.
inline constexpr std::size_t kStderrTailBytes = 1 << 20;
inline constexpr std::size_t kFaulthandlerDumpBytes = 64 * 1024;

// Whether this hung worker gets SIGABRT before its kill. py_spy_found: py-spy was found for
// the job's workers; stopped: the worker is in a stop (SIGSTOP) now.
bool abort_for_python_traceback(const HungRank& rank, const WatchedWorker& worker,
                                bool py_spy_found, bool stopped);

// Where the worker's faulthandler writes: its stderr log file, the console, or nowhere.
std::string traceback_destination(const WatchedWorker& worker);

// The hang line's note for a Python worker when py-spy is absent: Python frames need py-spy,
// how to get it, and (aborting) where faulthandler's traceback goes instead.
std::string py_spy_missing_note(const WatchedWorker& worker, bool aborting,
                                const std::string& stack_file);

// The stack file's section for faulthandler's traceback: the dump read from stderr_file (empty
// dump: none was found there), or where it went when stderr is not a file.
std::string faulthandler_section(const WatchedWorker& worker, std::string_view dump);

}  // namespace ddprun::agent
