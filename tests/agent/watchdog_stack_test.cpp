// Stack capture of real processes: a Python process sleeping in a known function (its name must
// appear among the parsed top frames), the same process stopped with SIGSTOP (it must stay
// stopped), a native process parked in a known C++ function, and tools that hang or do not
// exist. Runs with SIGCHLD blocked and SIGPIPE ignored, as in the agent.
#include <sys/prctl.h>

#include <catch2/catch.hpp>

#include "agent/stacks/stack_capture_probe.hpp"
#include "agent/stacks/stack_capture_runner.hpp"
#include "agent/watchdog/hang/hang_report.hpp"
#include "watchdog_support.hpp"

using namespace ddprun::agent;
using namespace ddprun::agent::watchdog_test;
using ddprun::agent::e2e::TempDir;

namespace {

const char* kSleeper = R"(import sys, time
def stuck_in_known_function():
    print("ready", flush=True)
    time.sleep(600)
stuck_in_known_function()
)";

// The agent's signal state, for the duration of a test.
class AgentLikeSignals {
 public:
  AgentLikeSignals() {
    sigset_t chld;
    ::sigemptyset(&chld);
    ::sigaddset(&chld, SIGCHLD);
    ::pthread_sigmask(SIG_BLOCK, &chld, &old_mask_);
    struct sigaction ignore{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  ~AgentLikeSignals() {
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t old_mask_{};
  struct sigaction old_pipe_{};
};

EnvMap process_env() {
  EnvMap env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::size_t eq = entry.find('=');
    env[entry.substr(0, eq)] = eq == std::string::npos ? "" : entry.substr(eq + 1);
  }
  return env;
}

StackTools tools_for(const std::string& python) {
  return locate_stack_tools(process_env(), {std::filesystem::path(python).parent_path().string()});
}

// SIGSTOP is asynchronous: wait for the stop itself (the planner must see it).
void stop_child(pid_t pid) {
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &info, WSTOPPED | WNOWAIT) == 0);
  REQUIRE(info.si_code == CLD_STOPPED);
}

bool has_function(const std::vector<StackFrame>& frames, const std::string& name) {
  for (const StackFrame& frame : frames) {
    if (frame.function.find(name) != std::string::npos)
      return true;
  }
  return false;
}

// A native process parked in a function with a known name, forked from this test.
[[gnu::noinline]] void ddprun_test_parked_in_known_function(int ready_fd) {
  [[maybe_unused]] const ssize_t n = ::write(ready_fd, "r", 1);
  for (;;)
    ::pause();
}

class NativeSleeper {
 public:
  NativeSleeper() {
    int ready[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(1);
      ddprun_test_parked_in_known_function(ready[1]);
    }
    ::close(ready[1]);
    char byte = 0;
    [[maybe_unused]] const ssize_t n = ::read(ready[0], &byte, 1);  // bounded: it writes at once
    ::close(ready[0]);
  }
  ~NativeSleeper() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("stack capture: a sleeping Python worker, then the same worker stopped") {
  const std::string python = any_python();
  const StackTools tools = tools_for(python);
  INFO("no py-spy, eu-stack or gdb found (scripts/install-deps.sh --tests installs them)");
  REQUIRE((tools.py_spy || tools.eu_stack || tools.gdb));
  AgentLikeSignals agent_signals;
  TempDir dir;
  e2e::write_file(dir / "sleeper.py", kSleeper);
  ChildProcess sleeper({{python, dir / "sleeper.py"}, {}, dir / "sleeper.out"});
  REQUIRE(sleeper.wait_output("ready", 60s));
  const WatchedWorker worker{1, 3, sleeper.pid()};

  for (const bool stop : {false, true}) {
    DYNAMIC_SECTION((stop ? "stopped with SIGSTOP" : "running")) {
      if (stop) {
        stop_child(sleeper.pid());
        REQUIRE(process_is_stopped(sleeper.pid()));
      }
      const StackTarget target = probe_stack_target(worker);
      CHECK(target.stopped == stop);
      const StackCapturePlan plan = plan_stack_capture({target}, dir / "logs", tools);
      const auto results = capture_stacks(plan, process_env(), 60s);
      REQUIRE(results.size() == 1);
      const std::string file_text = e2e::read_file(results[0].output_path);
      INFO(file_text);
      CHECK(results[0].output_path == dir / "logs" + "/stacks/rank3.txt");
      for (const auto& command : results[0].commands)
        CHECK(command.succeeded());
      const CapturedStacks stacks = read_captured_stacks(results[0]);
      INFO("no py-spy beside " << python << " (scripts/install-deps.sh --tests puts it in .venv)");
      REQUIRE(tools.py_spy);
      CHECK(has_function(stacks.python, "stuck_in_known_function"));
      HungRank rank = hung_rank_from_timer(TimerExpiry{worker, "scope", 1.0, 9, 1});
      attach_stacks(rank, stacks, results[0].output_path);
      CHECK(has_function(rank.top_frames, "stuck_in_known_function"));
      if (tools.eu_stack || tools.gdb)
        CHECK_FALSE(stacks.native.empty());
      // Capturing never resumes a stopped worker (nor stops a running one).
      CHECK(process_is_stopped(sleeper.pid()) == stop);
    }
  }
}

TEST_CASE("stack capture: a native process in a known function, running and stopped") {
  const StackTools found = locate_stack_tools(process_env(), {});
  INFO("neither eu-stack nor gdb found (scripts/install-deps.sh --tests installs elfutils)");
  REQUIRE((found.eu_stack || found.gdb));
  AgentLikeSignals agent_signals;
  TempDir dir;
  NativeSleeper sleeper;
  StackCaptureOptions native_only;
  native_only.python = false;
  // Each native tool that is installed, alone (the planner prefers eu-stack).
  std::vector<StackTools> each;
  if (found.eu_stack)
    each.push_back(StackTools{std::nullopt, found.eu_stack, std::nullopt});
  if (found.gdb)
    each.push_back(StackTools{std::nullopt, std::nullopt, found.gdb});
  for (const bool stop : {false, true}) {
    if (stop)
      stop_child(sleeper.pid());
    for (const StackTools& tools : each) {
      const StackTarget target = probe_stack_target(WatchedWorker{0, 0, sleeper.pid()});
      CHECK(target.stopped == stop);
      const StackCapturePlan plan = plan_stack_capture({target}, dir.path(), tools, native_only);
      const auto results = capture_stacks(plan, process_env(), 60s);
      const CapturedStacks stacks = read_captured_stacks(results.at(0));
      INFO(e2e::read_file(results.at(0).output_path));
      CHECK(results[0].commands.at(0).succeeded());
      CHECK(has_function(stacks.native, "ddprun_test_parked_in_known_function"));
      CHECK(has_function(summary_frames(stacks, 5), "ddprun_test_parked_in_known_function"));
      CHECK(process_is_stopped(sleeper.pid()) == stop);
    }
  }
}

TEST_CASE("stack capture runner: a hanging tool is killed, a missing one reported, order kept") {
  AgentLikeSignals agent_signals;
  TempDir dir;
  StackCapturePlan plan;
  plan.stacks_dir = dir / "stacks";
  TargetCapturePlan target;
  target.target = StackTarget{7, 0, ::getpid(), false};
  target.output_path = plan.stacks_dir + "/rank7.txt";
  target.commands = {
      {StackKind::kPython, {"/bin/sh", "-c", "echo first; exec sleep 600"}, 300ms},
      {StackKind::kNative, {dir / "no-such-tool"}, 10s},
      {StackKind::kNative, {"/bin/sh", "-c", "echo third"}, 10s},
  };
  plan.targets.push_back(target);
  // A second target in parallel, finishing at once.
  TargetCapturePlan quick = target;
  quick.target.global_rank = 8;
  quick.output_path = plan.stacks_dir + "/rank8.txt";
  quick.commands = {{StackKind::kNative, {"/bin/echo", "quick"}, 10s}};
  plan.targets.push_back(quick);

  // Driven as the agent's loop drives it: wait on fd() up to next_deadline(), then advance().
  StackCaptureRunner runner(plan, process_env(), Clock::now());
  const auto give_up = Clock::now() + 60s;
  while (!runner.done() && Clock::now() < give_up) {
    wait_readable(runner.fd(), std::min(runner.next_deadline().value_or(give_up), give_up));
    runner.advance(Clock::now());
  }
  REQUIRE(runner.done());
  const auto& results = runner.results();
  using End = StackCaptureRunner::CommandEnd;
  CHECK(results[0].commands[0].end == End::kTimedOut);
  CHECK(results[0].commands[1].end == End::kExited);
  CHECK(WEXITSTATUS(results[0].commands[1].wait_status) == 127);
  CHECK(results[0].commands[2].succeeded());
  CHECK(results[1].commands[0].succeeded());
  const std::string text = e2e::read_file(results[0].output_path);
  const std::size_t first = text.find("first\n");
  const std::size_t killed = text.find("end: killed after its 300 ms timeout");
  const std::size_t missing = text.find("cannot execute " + dir / "no-such-tool");
  const std::size_t third = text.find("third\n");
  CHECK(first != std::string::npos);
  CHECK(killed > first);
  CHECK(missing > killed);
  CHECK(third > missing);
  CHECK(third != std::string::npos);
  CHECK(e2e::read_file(results[1].output_path).find("quick\n") != std::string::npos);
}

TEST_CASE("stack capture runner: cancel kills what runs and skips the rest") {
  AgentLikeSignals agent_signals;
  TempDir dir;
  StackCapturePlan plan;
  plan.stacks_dir = dir / "stacks";
  plan.targets.push_back(
      TargetCapturePlan{StackTarget{0, 0, ::getpid(), false},
                        plan.stacks_dir + "/rank0.txt",
                        {{StackKind::kPython, {"/bin/sleep", "600"}, 600s},
                         {StackKind::kNative, {"/bin/sh", "-c", "echo $((40 + 2))"}, 10s}}});
  const auto results = capture_stacks(plan, process_env(), 200ms);
  using End = StackCaptureRunner::CommandEnd;
  CHECK(results[0].commands[0].end == End::kCancelled);
  CHECK(results[0].commands[1].end == End::kCancelled);
  const std::string text = e2e::read_file(results[0].output_path);
  CHECK(text.find("\n42\n") == std::string::npos);  // never ran
  CHECK(e2e::count_occurrences(text, "end: cancelled") == 2);
}
