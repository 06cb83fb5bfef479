// Stack capture planning, the stack-dump parsers (on text real tools printed: py-spy 0.4.3,
// eu-stack 0.188, gdb 13.1) and the hang report. Pure: no processes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "agent/stacks/stack_capture_plan.hpp"
#include "agent/stacks/stack_trace_parser.hpp"
#include "agent/watchdog/hang/hang_report.hpp"

using namespace ddprun::agent;
using namespace std::chrono_literals;

namespace {

// py-spy dump --native --pid 21139 (a main thread and one other thread).
const char* kPySpyNative = R"dump(Process 21139: /tmp/venv-wd/bin/python /tmp/sleeper2.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 21410 (idle): "Thread-1 (worker_thread_fn)"
    clock_nanosleep (libc.so.6)
    time_sleep (libpython3.11.so.1.0)
    worker_thread_fn (sleeper2.py:3)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
    thread_run (libpython3.11.so.1.0)
    0x7f65b00a71f5 (libc.so.6)
Thread 21139 (idle): "MainThread"
    clock_nanosleep (libc.so.6)
    time_sleep (libpython3.11.so.1.0)
    stuck_in_known_function (sleeper2.py:6)
    <module> (sleeper2.py:8)
    0x7f65b004524a (libc.so.6)
)dump";

// py-spy dump --nonblocking of a stopped single-threaded process: no thread name.
const char* kPySpyStopped = R"dump(Process 11889: /tmp/venv-wd/bin/python /tmp/sleeper.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 11889 (idle)
    stuck_in_known_function (sleeper.py:3)
    <module> (sleeper.py:4)
)dump";

// eu-stack -s -m -p 31353 (abridged).
const char* kEuStack = R"dump(PID 31353 - process
TID 31360:
#0  0x00007fca6a6df545 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48:7
#1  0x00007fca6ab15ada worker_loop - /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
TID 31353:
#0  0x00007fca6a6df545 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48:7
#1  0x00007fca6ab15ada time_sleep - /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
    ./Modules/timemodule.c:2159:15
#2  0x0000561f8550c3f2 - /usr/bin/bash
#3  0x00007fca6a9a6ee2 - 1 cfunction_vectorcall_O - /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
)dump";

// gdb -p 23231 -batch -ex 'thread apply all bt' (abridged; the main thread comes last).
const char* kGdb = R"dump([New LWP 23404]
[Thread debugging using libthread_db enabled]
0x00007fb47eeed545 in __GI___clock_nanosleep (clock_id=clock_id@entry=1, flags=flags@entry=1, req=req@entry=0x7fff8068c8e0, rem=rem@entry=0x0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
48	../sysdeps/unix/sysv/linux/clock_nanosleep.c: No such file or directory.

Thread 2 (Thread 0x7fb464c956c0 (LWP 23404) "python"):
#0  0x00007fb47eeed545 in __GI___clock_nanosleep (clock_id=clock_id@entry=1) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#1  0x00007fb47f315ada in other_thread_fn (timeout=<optimized out>) at ./Modules/timemodule.c:2159

Thread 1 (Thread 0x7fb47f60db80 (LWP 23231) "python"):
#0  0x00007fb47eeed545 in __GI___clock_nanosleep (clock_id=clock_id@entry=1, flags=flags@entry=1, req=req@entry=0x7fff8068c8e0, rem=rem@entry=0x0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#1  0x00007fb47f315ada in pysleep (timeout=<optimized out>) at ./Modules/timemodule.c:2159
#2  time_sleep (self=<optimized out>, timeout_obj=<optimized out>) at ./Modules/timemodule.c:383
#3  0x00007f10 in c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /usr/lib/libtorch_cpu.so
#4  0x00007f11 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f12 in format (s=0x1 "a (b)") at f.c:9
[Inferior 1 (process 23231) detached]
)dump";

}  // namespace

TEST_CASE("stack plan: py-spy then a native tool per worker, one file per rank") {
  StackTools tools{"/venv/bin/py-spy", "/usr/bin/eu-stack", "/usr/bin/gdb"};
  const std::vector<StackTarget> targets = {{3, 1, 501, false}, {2, 0, 500, true}};
  StackCapturePlan plan = plan_stack_capture(targets, "/logs/run/attempt_0", tools);
  CHECK(plan.stacks_dir == "/logs/run/attempt_0/stacks");
  REQUIRE(plan.targets.size() == 2);
  const TargetCapturePlan& running = plan.targets[0];
  CHECK(running.output_path == "/logs/run/attempt_0/stacks/rank3.txt");
  REQUIRE(running.commands.size() == 2);
  CHECK(running.commands[0].kind == StackKind::kPython);
  CHECK(running.commands[0].argv ==
        std::vector<std::string>{"/venv/bin/py-spy", "dump", "--pid", "501", "--native"});
  CHECK(running.commands[0].timeout == kDefaultStackToolTimeout);
  CHECK(running.commands[1].kind == StackKind::kNative);
  CHECK(running.commands[1].argv ==
        std::vector<std::string>{"/usr/bin/eu-stack", "-s", "-m", "-p", "501"});
  // A stopped process: py-spy cannot suspend it, so it reads without suspending (no --native).
  const TargetCapturePlan& stopped = plan.targets[1];
  CHECK(stopped.output_path == "/logs/run/attempt_0/stacks/rank2.txt");
  CHECK(stopped.commands[0].argv ==
        std::vector<std::string>{"/venv/bin/py-spy", "dump", "--pid", "500", "--nonblocking"});
}

TEST_CASE("stack plan: gdb without eu-stack, nothing without tools, options respected") {
  const std::vector<StackTarget> targets = {{0, 0, 77, false}};
  StackCapturePlan gdb_only = plan_stack_capture(targets, "/l", {std::nullopt, std::nullopt, "/g"});
  REQUIRE(gdb_only.targets[0].commands.size() == 1);
  CHECK(gdb_only.targets[0].commands[0].argv ==
        std::vector<std::string>{"/g", "-p", "77", "-batch", "-nx", "-ex", "set pagination off",
                                 "-ex", "thread apply all bt"});
  CHECK(plan_stack_capture(targets, "/l", {}).targets[0].commands.empty());
  StackCaptureOptions native_only;
  native_only.python = false;
  native_only.tool_timeout = 2s;
  StackCapturePlan plan =
      plan_stack_capture(targets, "/l", {"/p", "/e", std::nullopt}, native_only);
  REQUIRE(plan.targets[0].commands.size() == 1);
  CHECK(plan.targets[0].commands[0].argv.front() == "/e");
  CHECK(plan.targets[0].commands[0].timeout == 2s);
  CHECK(stack_section_header(plan.targets[0].commands[0]) ==
        "#### ddprun stack capture: native stacks: /e -s -m -p 77");
}

TEST_CASE("py-spy parser: the main thread's frames, innermost first") {
  const std::vector<StackFrame> frames = parse_py_spy_main_thread(kPySpyNative, 21139);
  REQUIRE(frames.size() == 5);
  CHECK(frames[0] == StackFrame{"clock_nanosleep", "libc.so.6", false});
  CHECK(frames[2] == StackFrame{"stuck_in_known_function", "sleeper2.py:6", true});
  CHECK(frames[3] == StackFrame{"<module>", "sleeper2.py:8", true});
  CHECK(frames[4] == StackFrame{"0x7f65b004524a", "libc.so.6", false});
  // Found by thread id when the thread has no name.
  const std::vector<StackFrame> stopped = parse_py_spy_main_thread(kPySpyStopped, 11889);
  REQUIRE(stopped.size() == 2);
  CHECK(stopped[0] == StackFrame{"stuck_in_known_function", "sleeper.py:3", true});
  // An unknown pid and no "MainThread": the first thread.
  CHECK(parse_py_spy_main_thread(kPySpyStopped, 1).size() == 2);
  // Error output has no frames.
  CHECK(parse_py_spy_main_thread("Error: Failed to get process executable name.\n"
                                 "Stack backtrace:\n   0: <E as anyhow>::ext_context\n",
                                 5)
            .empty());
  CHECK(parse_py_spy_main_thread("", 5).empty());
}

TEST_CASE("eu-stack parser: main thread by TID, symbol versions dropped, source lines kept") {
  const std::vector<StackFrame> frames = parse_native_main_thread(kEuStack, 31353);
  REQUIRE(frames.size() == 4);
  CHECK(frames[0] ==
        StackFrame{"clock_nanosleep", "../sysdeps/unix/sysv/linux/clock_nanosleep.c:48", false});
  CHECK(frames[1] == StackFrame{"time_sleep", "./Modules/timemodule.c:2159", false});
  CHECK(frames[2] == StackFrame{"??", "bash", false});
  CHECK(frames[3] == StackFrame{"cfunction_vectorcall_O", "libpython3.11.so.1.0", false});
  // Not the main thread's pid: the first thread.
  CHECK(parse_native_main_thread(kEuStack, 1).at(1).function == "worker_loop");
}

TEST_CASE("gdb parser: main thread by LWP, arguments stripped, C++ signatures kept") {
  const std::vector<StackFrame> frames = parse_native_main_thread(kGdb, 23231);
  REQUIRE(frames.size() == 6);
  CHECK(frames[0] == StackFrame{"__GI___clock_nanosleep",
                                "../sysdeps/unix/sysv/linux/clock_nanosleep.c:48", false});
  CHECK(frames[1] == StackFrame{"pysleep", "./Modules/timemodule.c:2159", false});
  CHECK(frames[2] == StackFrame{"time_sleep", "./Modules/timemodule.c:383", false});
  CHECK(frames[3] ==
        StackFrame{"c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<long, "
                   "std::ratio<1l, 1000l> >)",
                   "libtorch_cpu.so", false});
  CHECK(frames[4] == StackFrame{"??", "libc.so.6", false});
  CHECK(frames[5] == StackFrame{"format", "f.c:9", false});
  CHECK(parse_native_main_thread(kGdb, 23404).at(1).function == "other_thread_fn");
  // A single-threaded process without thread headers.
  const std::vector<StackFrame> bare = parse_native_main_thread(
      "#0  0x1 in pause () from /lib/libc.so.6\n#1  main () at m.c:3\n", 9);
  REQUIRE(bare.size() == 2);
  CHECK(bare[1] == StackFrame{"main", "m.c:3", false});
  CHECK(parse_native_main_thread("garbage\n#\n#x\n#12\n", 9) ==
        std::vector<StackFrame>{StackFrame{"??", "", false}});
}

TEST_CASE("stack file: sections split by marker lines; summary shows where Python waits") {
  const std::string file =
      std::string("#### ddprun stack capture: python stacks: /p dump --pid 21139 --native\n") +
      kPySpyNative + "#### ddprun stack capture: end: exit status 0\n" +
      "#### ddprun stack capture: native stacks: /e -s -m -p 21139\n" +
      "PID 21139 - process\nTID 21139:\n#0  0x1 clock_nanosleep@GLIBC_2.2.5 - /lib/libc.so.6\n" +
      "#### ddprun stack capture: end: exit status 0\n";
  const CapturedStacks stacks = parse_stack_file(file, 21139);
  REQUIRE(stacks.python.size() == 5);
  REQUIRE(stacks.native.size() == 1);
  CHECK(stacks.native[0].function == "clock_nanosleep");
  const std::vector<StackFrame> summary = summary_frames(stacks, 3);
  REQUIRE(summary.size() == 3);
  CHECK(summary[0].function == "clock_nanosleep");  // where the thread waits
  CHECK(summary[1].function == "stuck_in_known_function");
  CHECK(summary[2].function == "<module>");
  // Without Python frames: the native ones, unknown frames skipped.
  CapturedStacks native_only;
  native_only.native = {{"??", "", false}, {"pause", "libc.so.6", false}, {"main", "m.c:3", false}};
  CHECK(summary_frames(native_only, 5) ==
        std::vector<StackFrame>{{"pause", "libc.so.6", false}, {"main", "m.c:3", false}});
  CHECK(summary_frames(CapturedStacks{}, 5).empty());
}

TEST_CASE("hang report: lines for the failure table, one block per hung rank") {
  HungRank timed = hung_rank_from_timer(
      TimerExpiry{WatchedWorker{1, 3, 4242}, "/home/ada/train.py#17", 1767225600.5, 9, 1});
  attach_stacks(timed,
                CapturedStacks{{{"clock_nanosleep", "libc.so.6", false},
                                {"stuck_in_known_function", "train.py:9", true}},
                               {}},
                "/logs/stacks/rank3.txt");
  HungRank silent = hung_rank_from_silence(HungWorker{WatchedWorker{0, 2, 4241}, 12345ms}, 10s);
  HangReport report{"node-a", {silent, timed}, "/logs/stacks"};

  const std::vector<std::string> lines = format_hang_report_lines(report);
  const std::vector<std::string> expected = {
      "Hang detected on node-a: ranks 2, 3",
      "  rank 2 (local_rank 0, pid 4241):",
      "    hung: no heartbeat for 12.3 s (--watchdog-timeout 10.0 s)",
      "    stuck at: <no stack captured>",
      "  rank 3 (local_rank 1, pid 4242):",
      "    hung: file-timer scope \"/home/ada/train.py#17\" expired (SIGKILL)",
      "    stuck at: clock_nanosleep (libc.so.6)",
      "              stuck_in_known_function (train.py:9)",
      "    stacks  : /logs/stacks/rank3.txt",
      "  stacks of every local rank: /logs/stacks",
  };
  CHECK(lines == expected);
  CHECK(format_hung_rank_message(timed) ==
        "hung: file-timer scope \"/home/ada/train.py#17\" expired (SIGKILL)\n"
        "stuck at: clock_nanosleep (libc.so.6)\n"
        "          stuck_in_known_function (train.py:9)\n"
        "stacks  : /logs/stacks/rank3.txt");
  HungRank no_signal = hung_rank_from_timer(TimerExpiry{WatchedWorker{0, 0, 1}, "s", 1, 0, 1});
  CHECK(describe_hang_cause(no_signal) == "file-timer scope \"s\" expired (no signal requested)");
}

TEST_CASE("hang report: JSON for the events file, and back") {
  HungRank timed =
      hung_rank_from_timer(TimerExpiry{WatchedWorker{1, 3, 4242}, "scope", 10.0, 9, 2});
  timed.top_frames = {{"f", "a.py:1", true}};
  timed.stack_file = "/s/rank3.txt";
  HungRank silent = hung_rank_from_silence(HungWorker{WatchedWorker{0, 2, 4241}, 1500ms}, 1s);
  const HangReport report{"node-a", {timed, silent}, "/s"};
  const nlohmann::json fields = hang_report_json(report);
  CHECK(fields["host"] == "node-a");
  CHECK(fields["stacks_dir"] == "/s");
  CHECK(fields["hung"][0]["rank"] == 3);
  CHECK(fields["hung"][0]["cause"] == "timer_expired");
  CHECK(fields["hung"][0]["scope_id"] == "scope");
  CHECK(fields["hung"][0]["signal"] == 9);
  CHECK(fields["hung"][0]["top_frames"][0]["function"] == "f");
  CHECK(fields["hung"][0]["reason"] == "file-timer scope \"scope\" expired (SIGKILL)");
  CHECK(fields["hung"][1]["cause"] == "no_heartbeat");
  CHECK(fields["hung"][1]["silent_for_s"] == 1.5);
  CHECK(fields["hung"][1]["timeout_s"] == 1.0);

  // Through text, as it would travel to other nodes.
  const HangReport back = hang_report_from_json(nlohmann::json::parse(fields.dump()));
  CHECK(format_hang_report_lines(back) == format_hang_report_lines(report));
  CHECK(back.hung[0].top_frames == timed.top_frames);
  CHECK(back.hung[1].silent_for == 1500ms);
}

TEST_CASE("hang report from JSON refuses malformed and oversized input") {
  const nlohmann::json good = hang_report_json(
      HangReport{"n", {hung_rank_from_silence(HungWorker{WatchedWorker{0, 0, 1}, 2s}, 1s)}, ""});
  REQUIRE_NOTHROW(hang_report_from_json(good));
  auto broken = [&](auto change) {
    nlohmann::json copy = good;
    change(copy);
    return copy;
  };
  const std::vector<nlohmann::json> bad = {
      nlohmann::json::array(),
      broken([](auto& j) { j.erase("host"); }),
      broken([](auto& j) { j["host"] = 5; }),
      broken([](auto& j) { j["host"] = std::string(kMaxReportTextBytes + 1, 'h'); }),
      broken([](auto& j) { j["hung"] = "x"; }),
      broken([](auto& j) {
        j["hung"] = nlohmann::json::array();
        for (std::size_t i = 0; i <= kMaxHungRanksInReport; ++i)
          j["hung"].push_back(nullptr);
      }),
      broken([](auto& j) { j["hung"][0]["rank"] = -1; }),
      broken([](auto& j) { j["hung"][0]["rank"] = 18446744073709551615ull; }),
      broken([](auto& j) { j["hung"][0]["pid"] = "1"; }),
      broken([](auto& j) { j["hung"][0]["cause"] = "bored"; }),
      broken([](auto& j) { j["hung"][0]["silent_for_s"] = -1; }),
      broken([](auto& j) { j["hung"][0]["silent_for_s"] = 1e300; }),
      broken([](auto& j) { j["hung"][0].erase("timeout_s"); }),
      broken([](auto& j) { j["hung"][0]["top_frames"] = nlohmann::json::array({1, 2}); }),
      broken([](auto& j) {
        j["hung"][0]["top_frames"] = nlohmann::json::array();
        for (std::size_t i = 0; i <= kHangReportFrames; ++i)
          j["hung"][0]["top_frames"].push_back(
              {{"function", "f"}, {"location", ""}, {"python", false}});
      }),
  };
  for (const nlohmann::json& input : bad) {
    INFO(input.dump().substr(0, 200));
    CHECK_THROWS_AS(hang_report_from_json(input), std::invalid_argument);
  }
}

TEST_CASE("stack parsers survive mutated dumps (deterministic fuzz)") {
  std::mt19937 random(7);
  for (const char* fixture : {kPySpyNative, kPySpyStopped, kEuStack, kGdb}) {
    for (int round = 0; round < 500; ++round) {
      std::string text = std::string("#### ddprun stack capture: python stacks: x\n") + fixture +
                         "#### ddprun stack capture: native stacks: y\n" + fixture;
      for (int e = 0; e < 8; ++e) {
        const std::size_t at = random() % text.size();
        if (random() % 2 == 0) {
          text[at] = "()#\n :-0x@ \t\"MainThread\""[random() % 24];
        } else {
          text.erase(at, random() % 16);
        }
        if (text.empty())
          break;
      }
      const CapturedStacks stacks = parse_stack_file(text, 21139);
      const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
      CHECK(stacks.python.size() <= lines);
      CHECK(stacks.native.size() <= lines);
      CHECK(summary_frames(stacks, 5).size() <= 5);
    }
  }
}
