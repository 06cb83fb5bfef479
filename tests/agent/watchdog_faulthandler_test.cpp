// Python frames without py-spy: faulthandler's dump read back from a worker's stderr (on text
// Python 3.11.2's faulthandler printed on SIGABRT), and the decisions of that route. Pure.
#include <signal.h>

#include <catch2/catch.hpp>

#include "agent/stacks/faulthandler_parser.hpp"
#include "agent/watchdog/hang/python_traceback_fallback.hpp"

using namespace ddprun::agent;
using namespace std::chrono_literals;

namespace {

// A worker's stderr: its own output, then the dump (a helper thread first; the last line has
// no newline, as faulthandler leaves it).
const char* kStderr = R"(warning: Fatal Python error: not at a line's start
Fatal Python error: Aborted

Thread 0x00007fc1c21566c0 (most recent call first):
  File "/tmp/fh_demo.py", line 3 in worker_thread_fn
  File "/usr/lib/python3.11/threading.py", line 975 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 995 in _bootstrap

Current thread 0x00007fc1c2411040 (most recent call first):
  File "/tmp/fh_demo.py", line 5 in wait_forever
  File "/tmp/fh_demo.py", line 8 in <module>)";

WatchedWorker python_worker() {
  WatchedWorker worker{0, 0, 4242};
  worker.python = true;
  worker.faulthandler = true;
  return worker;
}

}  // namespace

TEST_CASE("faulthandler: the last dump, its main thread innermost first") {
  const std::string_view dump = last_faulthandler_dump(kStderr, 1 << 16);
  REQUIRE(dump.starts_with("Fatal Python error: Aborted\n"));
  CHECK(dump.ends_with("line 8 in <module>"));
  CHECK(last_faulthandler_dump(kStderr, 10) == "Fatal Pyth");
  CHECK(last_faulthandler_dump("no dump here\n", 1 << 16).empty());

  const std::vector<StackFrame> frames = parse_faulthandler_main_thread(dump);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0] == StackFrame{"wait_forever", "/tmp/fh_demo.py:5", true});
  CHECK(frames[1] == StackFrame{"<module>", "/tmp/fh_demo.py:8", true});
  CHECK(frames_text(frames) == "wait_forever (/tmp/fh_demo.py:5) < <module> (/tmp/fh_demo.py:8)");
  // A cut-off dump: the current thread when no thread reaches <module>.
  const std::string_view cut = dump.substr(0, dump.find("line 8"));
  CHECK(parse_faulthandler_main_thread(cut).front().function == "wait_forever");
  CHECK(parse_faulthandler_main_thread("garbage\n  File \"x\", line 1 in f\n").empty());
}

TEST_CASE("faulthandler route: only Python workers about to be SIGKILLed, not stopped ones") {
  HungRank silent;
  silent.cause = HangCause::kNoHeartbeat;
  HungRank timer_kill;
  timer_kill.cause = HangCause::kTimerExpired;
  timer_kill.signal = SIGKILL;
  HungRank timer_term = timer_kill;
  timer_term.signal = SIGTERM;
  const WatchedWorker worker = python_worker();
  CHECK(abort_for_python_traceback(silent, worker, false, false));
  CHECK(abort_for_python_traceback(timer_kill, worker, false, false));
  CHECK_FALSE(abort_for_python_traceback(timer_term, worker, false, false));  // the job's choice
  CHECK_FALSE(abort_for_python_traceback(silent, worker, true, false));       // py-spy found
  CHECK_FALSE(abort_for_python_traceback(silent, worker, false, true));       // stopped
  WatchedWorker binary = worker;
  binary.python = false;
  CHECK_FALSE(abort_for_python_traceback(silent, binary, false, false));
  WatchedWorker disabled = worker;
  disabled.faulthandler = false;  // PYTHONFAULTHANDLER= (empty) by the job
  CHECK_FALSE(abort_for_python_traceback(silent, disabled, false, false));
}

TEST_CASE("faulthandler route: the hang line's note and the stack file's section") {
  WatchedWorker console = python_worker();
  const std::string note = py_spy_missing_note(console, false, "");
  CHECK(note.find("Python frames need py-spy") != std::string::npos);
  CHECK(note.find("`pip install py-spy`") != std::string::npos);
  CHECK(note.find("SIGABRT") == std::string::npos);
  CHECK(py_spy_missing_note(console, true, "/s/rank0.txt")
            .ends_with("faulthandler writes the traceback to the console (the worker's stderr)"));
  WatchedWorker logged = python_worker();
  logged.stderr_file = "/l/0/stderr.log";
  CHECK(py_spy_missing_note(logged, true, "/s/rank0.txt")
            .ends_with("to /l/0/stderr.log, copied to /s/rank0.txt"));
  WatchedWorker hidden = python_worker();
  hidden.stderr_discarded = true;
  CHECK(traceback_destination(hidden).starts_with("nowhere"));

  const std::string section = faulthandler_section(logged, "Fatal Python error: Aborted");
  CHECK(section ==
        "#### ddprun stack capture: python traceback: faulthandler after SIGABRT, from "
        "/l/0/stderr.log\nFatal Python error: Aborted\n#### ddprun stack capture: end: "
        "faulthandler\n");
  CHECK(faulthandler_section(logged, "").find("(no faulthandler traceback found there)") !=
        std::string::npos);
  CHECK(faulthandler_section(console, "").find("written to the console") != std::string::npos);
}
