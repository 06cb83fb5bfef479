#include "agent/watchdog/hang/python_traceback_fallback.hpp"

#include <signal.h>

#include "agent/stacks/stack_capture_plan.hpp"

namespace ddprun::agent {

bool abort_for_python_traceback(const HungRank& rank, const WatchedWorker& worker,
                                bool py_spy_found, bool stopped) {
  if (py_spy_found || !worker.python || !worker.faulthandler || stopped)
    return false;
  return rank.cause == HangCause::kNoHeartbeat || rank.signal == SIGKILL;
}

std::string traceback_destination(const WatchedWorker& worker) {
  if (!worker.stderr_file.empty())
    return worker.stderr_file;
  if (worker.stderr_discarded)
    return "nowhere (--local-ranks-filter hides this rank's stderr; --tee 2 or --redirects 2 "
           "keeps it in a file)";
  return "the console (the worker's stderr)";
}

std::string py_spy_missing_note(const WatchedWorker& worker, bool aborting,
                                const std::string& stack_file) {
  std::string note =
      "Python frames need py-spy, not found next to the worker's python or on PATH (`pip install "
      "py-spy` into the job's environment, or put py-spy on PATH)";
  if (!aborting)
    return note;
  note += "; SIGABRT first, so Python's faulthandler writes the traceback to ";
  if (!worker.stderr_file.empty() && !stack_file.empty())
    return note + worker.stderr_file + ", copied to " + stack_file;
  return note + traceback_destination(worker);
}

std::string faulthandler_section(const WatchedWorker& worker, std::string_view dump) {
  std::string text(kStackSectionMarker);
  text += "python traceback: faulthandler after SIGABRT, ";
  if (worker.stderr_file.empty()) {
    text += "written to " + traceback_destination(worker) + "\n";
  } else {
    text += "from " + worker.stderr_file + "\n";
    text += dump.empty() ? "(no faulthandler traceback found there)\n" : std::string(dump);
    if (!text.ends_with('\n'))
      text += '\n';
  }
  text += std::string(kStackSectionMarker) + "end: faulthandler\n";
  return text;
}

}  // namespace ddprun::agent
