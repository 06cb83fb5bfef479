// Python frames without py-spy, in the real agent: Debian's python3 (no py-spy next to it) with
// a PATH that has no py-spy either, a worker hung in a named function, found by
// --watchdog-timeout. The hang line says Python frames need py-spy and how to get it; the
// worker gets SIGABRT before the kill, and Python's faulthandler traceback (PYTHONFAULTHANDLER,
// set by the agent) names the function, in the stack file or on the console.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "events_file.hpp"
#include "watchdog_support.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;

namespace {

constexpr const char* kSystemPython = "/usr/bin/python3";
constexpr const char* kPathWithoutPySpy = "/usr/bin:/bin";

// Rank 0's first attempt beats once, then hangs in wait_forever (its later attempts succeed).
// It works in `dir`, so a core file, if SIGABRT left one, would be found there.
constexpr const char* kHangingWorker = R"(import os, sys, time
os.chdir(sys.argv[1])

def wait_forever():
    time.sleep(3600)

if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    os.write(int(os.environ["DDPRUN_HEARTBEAT_FD"]), b".")
    wait_forever()
)";

// Core dumps allowed for the test's children (the agent's workers inherit the limit), so a
// SIGABRT that could leave a core file does leave one; restored afterwards.
class CoreDumpsAllowed {
 public:
  CoreDumpsAllowed() {
    ::getrlimit(RLIMIT_CORE, &saved_);
    rlimit allowed = saved_;
    allowed.rlim_cur = saved_.rlim_max;
    ::setrlimit(RLIMIT_CORE, &allowed);
  }
  ~CoreDumpsAllowed() { ::setrlimit(RLIMIT_CORE, &saved_); }
  CoreDumpsAllowed(const CoreDumpsAllowed&) = delete;
  CoreDumpsAllowed& operator=(const CoreDumpsAllowed&) = delete;

 private:
  rlimit saved_{};
};

std::string line_with(const std::string& text, const std::string& needle) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(needle) != std::string::npos)
      return line;
  }
  return {};
}

// The path after `marker` in `line`, up to the next ' ' or ';'.
std::string path_after(const std::string& line, const std::string& marker) {
  const auto at = line.find(marker);
  if (at == std::string::npos)
    return {};
  const auto start = at + marker.size();
  return line.substr(start, line.find_first_of(" ;", start) - start);
}

bool py_spy_reachable() {
  for (const char* dir : {"/usr/bin", "/bin"}) {
    if (::access((std::string(dir) + "/py-spy").c_str(), X_OK) == 0)
      return true;
  }
  return false;
}

bool has_core_file(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with("core"))
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("watchdog timeout without py-spy: faulthandler's traceback names the Python function") {
  // What scripts/install-deps.sh --tests leaves: Debian's python3, and py-spy only in .venv.
  INFO("needs /usr/bin/python3 (python3-torch) and no py-spy in /usr/bin or /bin");
  REQUIRE(::access(kSystemPython, X_OK) == 0);
  REQUIRE_FALSE(py_spy_reachable());
  TempDir dir;
  write_file(dir / "hang_worker.py", kHangingWorker);
  const std::map<std::string, std::string> env{
      {"PATH", kPathWithoutPySpy}, {"PYTHON_EXEC", kSystemPython}, {"OMP_NUM_THREADS", "1"}};
  const CoreDumpsAllowed cores;

  SECTION("stderr tee'd to its log file: the traceback is copied into the stack file") {
    Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "1", "--watchdog-timeout",
                   "1", "--tee", "2", "--log_dir", dir / "logs", "--events-file", dir / "events",
                   dir / "hang_worker.py", dir.path()},
                  dir / "agent", env);
    const auto status = agent.wait_exit(60s);
    const std::string output = agent.output();
    INFO(output);
    REQUIRE(status == 1);  // no restarts: the hang fails the job

    const std::string hang = line_with(output, ") hung: no heartbeat for ");
    REQUIRE(!hang.empty());
    std::printf("watchdog_python: %s\n", hang.c_str());
    CHECK(hang.find("Python frames need py-spy") != std::string::npos);
    CHECK(hang.find("pip install py-spy") != std::string::npos);
    CHECK(hang.find("faulthandler") != std::string::npos);
    const std::string stack_file = path_after(hang, "; stacks: ");
    REQUIRE(stack_file.ends_with("/attempt_0/stacks/rank0.txt"));
    CHECK(hang.find("copied to " + stack_file) != std::string::npos);

    const std::string python_line = line_with(output, ") Python stack (faulthandler): ");
    std::printf("watchdog_python: %s\n", python_line.c_str());
    CHECK(python_line.find("wait_forever (" + dir / "hang_worker.py:5)") != std::string::npos);
    const std::string stacks = read_file(stack_file);
    CHECK(stacks.find("python traceback: faulthandler after SIGABRT, from ") != std::string::npos);
    CHECK(stacks.find("File \"" + dir / "hang_worker.py\", line 5 in wait_forever") !=
          std::string::npos);

    const auto failures = events_named(dir / "events", "failure");
    REQUIRE(failures.size() == 1);
    CHECK(failures[0]["exit_code"] == -SIGABRT);
    const std::string message = failures[0]["message"];
    CHECK(message.starts_with("hung: no heartbeat for "));
    // The failure table names the Python frames, not the interpreter's C ones.
    CHECK(message.find("stuck at: wait_forever (" + dir / "hang_worker.py:5)") !=
          std::string::npos);
    CHECK(output.find("traceback : hung: no heartbeat for ") != std::string::npos);
    CHECK(!has_core_file(dir.path()));
  }

  SECTION("stderr on the console: the traceback is there, and the job restarts") {
    Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "1", "--watchdog-timeout",
                   "1", "--max_restarts", "1", "--log_dir", dir / "logs", "--events-file",
                   dir / "events", dir / "hang_worker.py", dir.path()},
                  dir / "agent", env);
    const auto status = agent.wait_exit(60s);
    const std::string output = agent.output();
    INFO(output);
    REQUIRE(status == 0);  // the second attempt does not hang
    CHECK(events_named(dir / "events", "workers_started").size() == 2);

    const std::string hang = line_with(output, ") hung: no heartbeat for ");
    REQUIRE(!hang.empty());
    CHECK(hang.find("pip install py-spy") != std::string::npos);
    CHECK(hang.find("faulthandler writes the traceback to the console") != std::string::npos);
    // The worker's own stderr is the agent's: faulthandler's dump is in the agent's output.
    CHECK(output.find("File \"" + dir / "hang_worker.py\", line 5 in wait_forever") !=
          std::string::npos);
    const std::string stacks = read_file(path_after(hang, "; stacks: "));
    CHECK(stacks.find("faulthandler after SIGABRT, written to the console") != std::string::npos);
    CHECK(!has_core_file(dir.path()));
  }
}
