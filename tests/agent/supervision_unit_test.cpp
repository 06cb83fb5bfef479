// Pure parts of the agent: worker environment, prefixes, the shared console, log layout, exit
// interpretation, run-loop decisions, failure summary, error files and event lines.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/base/event_log.hpp"
#include "agent/logs/console.hpp"
#include "agent/logs/log_layout.hpp"
#include "agent/logs/log_prefix.hpp"
#include "agent/workers/error_file.hpp"
#include "agent/workers/failure_gathering.hpp"
#include "agent/workers/failure_summary.hpp"
#include "agent/workers/process_state.hpp"
#include "agent/workers/stuck_workers.hpp"
#include "agent/workers/worker_env.hpp"
#include "agent/workers/worker_exit.hpp"
#include "agent/workers/worker_process.hpp"

using namespace ddprun::agent;
using ddprun::rendezvous::round::unix_time;

namespace {

RoundInfo two_node_round() {
  RoundInfo round;
  round.round = 3;
  round.group_rank = 1;
  round.group_world_size = 2;
  round.base_global_rank = 2;
  round.world_size = 4;
  round.restart_count = 1;
  round.master_addr = "127.0.0.2";
  round.master_port = 4242;
  round.run_id = "job7";
  return round;
}

}  // namespace

TEST_CASE("worker environment carries torchrun's variables") {
  WorkerSpec config;
  const NodeShape shape{2, 3};
  WorkerEnvInputs inputs{{{"PATH", "/bin"}, {"RANK", "stale"}}, 1, "/logs/1/error.json"};
  const EnvMap env = build_worker_env(config, shape, two_node_round(), inputs);
  CHECK(env.at("PATH") == "/bin");
  CHECK(env.at("LOCAL_RANK") == "1");
  CHECK(env.at("RANK") == "3");  // torchrun's values win over inherited ones
  CHECK(env.at("GROUP_RANK") == "1");
  CHECK(env.at("ROLE_RANK") == "3");
  CHECK(env.at("ROLE_NAME") == "default");
  CHECK(env.at("LOCAL_WORLD_SIZE") == "2");
  CHECK(env.at("WORLD_SIZE") == "4");
  CHECK(env.at("GROUP_WORLD_SIZE") == "2");
  CHECK(env.at("ROLE_WORLD_SIZE") == "4");
  CHECK(env.at("MASTER_ADDR") == "127.0.0.2");
  CHECK(env.at("MASTER_PORT") == "4242");
  CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "3");
  CHECK(env.at("TORCHELASTIC_RUN_ID") == "job7");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "True");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE") == "/logs/1/error.json");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK_FALSE(env.contains("NCCL_ASYNC_ERROR_HANDLING"));  // PyTorch >= 2.2 would warn
  CHECK(env.at("OMP_NUM_THREADS") == "1");
}

TEST_CASE("worker environment keeps inherited tuning and applies launcher overrides") {
  WorkerSpec config;
  const NodeShape shape{4, 0};
  config.virtual_local_rank = true;
  config.env_overrides = {{"EXTRA", "x"}};
  WorkerEnvInputs inputs{
      {{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}, 2, ""};
  const EnvMap env = build_worker_env(config, shape, two_node_round(), inputs);
  CHECK(env.at("OMP_NUM_THREADS") == "8");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
  CHECK(env.at("LOCAL_RANK") == "0");  // --virtual_local_rank
  CHECK(env.at("RANK") == "4");
  CHECK(env.at("EXTRA") == "x");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE").empty());
}

TEST_CASE("workers never inherit the agent's job secret or etcd password") {
  WorkerSpec config;
  WorkerEnvInputs inputs{{{"DDPRUN_RDZV_SECRET", "s3cret"},
                          {"DDPRUN_ETCD_PASSWORD", "hunter2"},
                          {"DDPRUN_RDZV_SECRET_FILE", "/run/job.secret"},
                          {"HOME", "/home/u"}},
                         0,
                         ""};
  const EnvMap env = build_worker_env(config, NodeShape{}, two_node_round(), inputs);
  CHECK_FALSE(env.contains("DDPRUN_RDZV_SECRET"));
  CHECK_FALSE(env.contains("DDPRUN_ETCD_PASSWORD"));
  CHECK(env.at("DDPRUN_RDZV_SECRET_FILE") ==
        "/run/job.secret");  // a path, readable by its owner only
  CHECK(env.at("HOME") == "/home/u");
}

TEST_CASE("worker environment passes an inherited pre-2.2 NCCL_ASYNC_ERROR_HANDLING on") {
  WorkerSpec config;
  WorkerEnvInputs inputs{{{"NCCL_ASYNC_ERROR_HANDLING", "0"}}, 0, ""};
  const EnvMap env = build_worker_env(config, NodeShape{}, two_node_round(), inputs);
  CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");  // the job's choice, not torchrun's 1
}

TEST_CASE("--virtual-local-rank gives each worker its own GPU, as torchrun 2.13 does") {
  WorkerSpec config;
  const NodeShape shape{2, 0};
  config.virtual_local_rank = true;
  const auto device = [&](EnvMap inherited, int local_rank) {
    return build_worker_env(config, shape, RoundInfo{}, {std::move(inherited), local_rank, ""})
        .at("CUDA_VISIBLE_DEVICES");
  };
  CHECK(device({}, 1) == "1");  // unset: the local rank itself
  CHECK(device({{"CUDA_VISIBLE_DEVICES", "3, 5"}}, 0) == "3");
  CHECK(device({{"CUDA_VISIBLE_DEVICES", "3, 5"}}, 1) == "5");
  CHECK(device({{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}}, 1) == "GPU-b");
  config.virtual_local_rank = false;
  CHECK_FALSE(
      build_worker_env(config, shape, RoundInfo{}, {{}, 1, ""}).contains("CUDA_VISIBLE_DEVICES"));
}

TEST_CASE("a single worker per node gets no OMP_NUM_THREADS") {
  WorkerSpec config;
  const EnvMap env = build_worker_env(config, NodeShape{}, RoundInfo{}, WorkerEnvInputs{});
  CHECK_FALSE(env.contains("OMP_NUM_THREADS"));
}

TEST_CASE("prefix templates expand torchrun's placeholders and ddprun's hostname") {
  PrefixFields fields{"trainer", 5, 1, "node-a"};
  CHECK(expand_prefix_template(kDefaultPrefixTemplate, fields) == "[trainer1]:");
  CHECK(expand_prefix_template("[${rank}|$local_rank@${hostname}] ", fields) == "[5|1@node-a] ");
  CHECK(expand_prefix_template("${unknown} $$ ${rank", fields) == "${unknown} $ ${rank");
}

TEST_CASE("line prefixer shows partial lines at once and prefixes every line") {
  LinePrefixer prefixer("[p]:");
  CHECK(prefixer.feed("hel") == "[p]:hel");  // a partial line is not held back
  CHECK(prefixer.line_open());
  CHECK(prefixer.feed("lo\nwor") == "lo\n[p]:wor");
  CHECK(prefixer.feed("ld\n\nx") == "ld\n[p]:\n[p]:x");  // an empty line keeps its prefix
  CHECK(prefixer.end_line() == "\n");
  CHECK_FALSE(prefixer.line_open());
  CHECK(prefixer.end_line() == "");
  CHECK(prefixer.feed("y\n") == "[p]:y\n");
}

TEST_CASE("line prefixer redraws a carriage-return progress bar with its prefix") {
  LinePrefixer prefixer("[p]:");
  CHECK(prefixer.feed("\r 10%") == "[p]:\r[p]: 10%");
  CHECK(prefixer.feed("\r") == "\r");
  CHECK(prefixer.line_open());                         // the bar is still on the screen
  CHECK(prefixer.feed(" 20%\r\n") == "[p]: 20%\r\n");  // "\r\n" ends one line
  CHECK_FALSE(prefixer.line_open());
  CHECK(prefixer.feed("done\r\n") == "[p]:done\r\n");
}

TEST_CASE("console: a worker's open line is ended before another worker writes beside it") {
  int out[2];
  int err[2];
  REQUIRE(::pipe(out) == 0);
  REQUIRE(::pipe(err) == 0);
  auto drain = [](int fd) {
    std::string text;
    char buffer[4096];
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
      text.append(buffer, static_cast<std::size_t>(n));
    return text;
  };
  SECTION("stdout and stderr are different files: each keeps its own lines") {
    Console console(out[1], err[1]);
    const int a = console.add_writer(ConsoleStream::kOut, "[a]:");
    const int b = console.add_writer(ConsoleStream::kOut, "[b]:");
    const int c = console.add_writer(ConsoleStream::kErr, "[c]:");
    console.write(a, "partial");
    console.write(c, "err\n");  // another file: a's line stays open
    console.write(b, "line\n");
    console.write(a, "rest\n");
    console.write(a, "\r 10%");
    console.end_line(a);
    console.end_line(a);
    CHECK(drain(out[0]) == "[a]:partial\n[b]:line\n[a]:rest\n[a]:\r[a]: 10%\n");
    CHECK(drain(err[0]) == "[c]:err\n");
  }
  SECTION("stdout and stderr are the same file (a terminal, 2>&1): one console") {
    const int same = ::dup(out[1]);
    Console console(out[1], same);
    const int a = console.add_writer(ConsoleStream::kOut, "[a]:");
    const int c = console.add_writer(ConsoleStream::kErr, "[c]:");
    console.write(a, "partial");
    console.write(c, "err\n");
    console.write(a, "x");
    console.end_open_lines();
    CHECK(drain(out[0]) == "[a]:partial\n[c]:err\n[a]:x\n");
    ::close(same);
  }
  for (int fd : {out[0], out[1], err[0], err[1]})
    ::close(fd);
}

TEST_CASE("line splitter cuts lines as Python's universal newlines do") {
  LineSplitter splitter(8);
  using Lines = std::vector<std::string>;
  CHECK(splitter.feed("a\nb") == Lines{"a"});
  CHECK(splitter.feed("c\r") == Lines{"bc"});
  CHECK(splitter.feed("\nd\r\ne") == Lines{"d"});           // "\r\n" across two feeds counts once
  CHECK(splitter.feed("0123456789") == Lines{"e0123456"});  // bounded
  CHECK(splitter.finish() == Lines{"789"});
  CHECK(splitter.finish().empty());
}

TEST_CASE("log plan follows torchrun: inherit by default, redirects, tee and the filter") {
  LogConfig config;
  SECTION("default: the worker inherits the console; error file in the attempt directory") {
    auto plan = plan_worker_logs(config, "/l/attempt_0", 1);
    CHECK(plan.out.route == StreamRoute::kInherit);
    CHECK(plan.err.route == StreamRoute::kInherit);
    CHECK(plan.out.file.empty());
    CHECK(plan.error_file == "/l/attempt_0/1/error.json");
  }
  SECTION("redirect stdout: file only; tee stderr: file and console") {
    config.redirects.all = kStdOut;
    config.tee.all = kStdErr;
    auto plan = plan_worker_logs(config, "/l/attempt_2", 0);
    CHECK(plan.out.route == StreamRoute::kFile);
    CHECK(plan.out.file == "/l/attempt_2/0/stdout.log");
    CHECK(plan.err.route == StreamRoute::kTee);
    CHECK(plan.err.file == "/l/attempt_2/0/stderr.log");
  }
  SECTION("per-rank map and filter") {
    config.tee.per_local_rank = {{2, 3}};
    config.local_ranks_filter = {0};
    auto rank2 = plan_worker_logs(config, "/l/a", 2);
    CHECK(rank2.out.route == StreamRoute::kFile);  // tee'd but hidden: the file only
    CHECK(rank2.out.file == "/l/a/2/stdout.log");
    auto rank1 = plan_worker_logs(config, "/l/a", 1);
    CHECK(rank1.err.route == StreamRoute::kDiscard);  // hidden, not redirected: /dev/null
    CHECK(rank1.err.file.empty());
    CHECK(plan_worker_logs(config, "/l/a", 0).out.route == StreamRoute::kInherit);
  }
  SECTION("duplicate filters copy from the tee'd, shown streams only") {
    config.tee.all = kStdOut;
    config.local_ranks_filter = {0, 1};
    config.duplicate_stdout_filters = {"loss"};
    config.duplicate_stderr_filters = {"warn"};
    auto rank0 = plan_worker_logs(config, "/l/a", 0);
    CHECK(rank0.out.duplicate_file == "/l/a/filtered_stdout.log");
    CHECK(rank0.out.duplicate_filters == std::vector<std::string>{"loss"});
    CHECK(rank0.err.duplicate_file.empty());                                // stderr is not tee'd
    CHECK(plan_worker_logs(config, "/l/a", 2).out.duplicate_file.empty());  // hidden
  }
  SECTION("file logging disabled: no files, the console stays, the filter still hides") {
    config.redirects.all = 3;
    config.local_ranks_filter = {1};
    auto plan = plan_worker_logs(config, "", 1);
    CHECK(plan.out.route == StreamRoute::kInherit);
    CHECK(plan.out.file.empty());
    CHECK(plan.error_file.empty());
    CHECK(plan_worker_logs(config, "", 0).err.route == StreamRoute::kDiscard);
  }
}

TEST_CASE("wait statuses become torchrun exit codes") {
  CHECK(worker_exit_from_wait_status(0).exit_code == 0);
  CHECK(worker_exit_from_wait_status(3 << 8).exit_code == 3);
  CHECK(worker_exit_from_wait_status(SIGKILL).exit_code == -SIGKILL);
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(default_failure_message(WorkerExit{-9}, 77) == "Signal 9 (SIGKILL) received by PID 77");
}

TEST_CASE("group state applies gang semantics") {
  using E = std::optional<WorkerExit>;
  CHECK(group_state({E{}, E{}}) == GroupState::kRunning);
  CHECK(group_state({WorkerExit{0}, E{}}) == GroupState::kRunning);
  CHECK(group_state({WorkerExit{0}, WorkerExit{0}}) == GroupState::kSucceeded);
  CHECK(group_state({E{}, WorkerExit{2}}) == GroupState::kFailed);
}

TEST_CASE("failure summary has torchrun's layout with the job-wide root cause") {
  WorkerFailure root{unix_time(1000.0), "127.0.0.3", 2, 0, 3, 11, "", "boom"};
  WorkerFailure other{unix_time(1001.0), "127.0.0.2", 0, 0, -15, 12, "/e.json", "line1\nline2"};
  const std::string text = format_failure_summary("train.py", {root, other});
  CHECK(text.find("train.py FAILED") != std::string::npos);
  CHECK(text.find("\n=====") != std::string::npos);
  CHECK(text.find(std::string(61, '=')) == std::string::npos);  // capped at 60
  // Numbered in rank order: rank 0 is [0], the root cause (rank 2) is [1].
  const auto root_at = text.find("Root Cause (first observed failure):\n[1]:");
  REQUIRE(root_at != std::string::npos);
  CHECK(text.find("Failures:\n[0]:") != std::string::npos);
  CHECK(text.find("  host      : 127.0.0.3", root_at) != std::string::npos);
  CHECK(text.find("  rank      : 2 (local_rank: 0)") != std::string::npos);
  CHECK(text.find("  exitcode  : 3 (pid: 11) \n") != std::string::npos);
  CHECK(text.find("  exitcode  : -15 (pid: 12)  (SIGTERM)\n") != std::string::npos);
  CHECK(text.find("  error_file: <N/A>") != std::string::npos);
  CHECK(text.find("  traceback : line1\n  line2") < root_at);  // other failures come first
  const std::string alone = format_failure_summary("x", {root});
  CHECK(alone.find("<NO_OTHER_FAILURES>") != std::string::npos);
}

TEST_CASE("failure summary of several failed ranks is torchrun 2.13's, byte for byte") {
  // What torchrun 2.13 printed for `torchrun --standalone --nproc-per-node 3 ./sub/fail.py`
  // where local ranks 1 and 2 exit 3, times aside.
  const WorkerFailure rank1{unix_time(1000.25),
                            "localhost",
                            1,
                            1,
                            3,
                            12579,
                            "",
                            "To enable traceback see: "
                            "https://pytorch.org/docs/stable/elastic/errors.html"};
  WorkerFailure rank2 = rank1;
  rank2.timestamp = unix_time(1000.5);
  rank2.global_rank = 2;
  rank2.local_rank = 2;
  rank2.pid = 12580;
  const std::string time = format_failure_time(unix_time(1000.25));
  const std::string expected =
      "\n============================================================\n"
      "./sub/fail.py FAILED\n"
      "------------------------------------------------------------\n"
      "Failures:\n"
      "[1]:\n"
      "  time      : " +
      time +
      "\n"
      "  host      : localhost\n"
      "  rank      : 2 (local_rank: 2)\n"
      "  exitcode  : 3 (pid: 12580) \n"
      "  error_file: <N/A>\n"
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
      "------------------------------------------------------------\n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  time      : " +
      time +
      "\n"
      "  host      : localhost\n"
      "  rank      : 1 (local_rank: 1)\n"
      "  exitcode  : 3 (pid: 12579) \n"
      "  error_file: <N/A>\n"
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
      "============================================================\n";
  CHECK(format_failure_summary("./sub/fail.py", {rank1, rank2}) == expected);
}

TEST_CASE("the failure table's title is the entry point as given, as torchrun shows it") {
  WorkerSpec config;
  config.entry_point = "./sub/fail.py";
  config.argv = {"/usr/bin/python3", "-u", "./sub/fail.py", "--lr", "1"};
  CHECK(failure_title_name(config) == "./sub/fail.py");
  config.entry_point = "mypkg.train";  // -m
  CHECK(failure_title_name(config) == "mypkg.train");
  config.entry_point = "/bin/sh";  // --no-python
  CHECK(failure_title_name(config) == "/bin/sh");
  config.entry_point = "train";  // the bundled trainer
  config.argv = {"/opt/ddprun/bin/ddprun-train"};
  CHECK(failure_title_name(config) == "train");
}

TEST_CASE("error files in torchrun's format") {
  auto parsed = parse_error_file(
      R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback...", "timestamp": "1700000000"}}})");
  REQUIRE(parsed);
  CHECK(parsed->message == "Traceback...");
  REQUIRE(parsed->timestamp);
  CHECK(parsed->timestamp->time_since_epoch().count() == Approx(1700000000.0));
  CHECK(parse_error_file(R"({"message": "plain"})")->message == "plain");
  CHECK_FALSE(parse_error_file("not json"));
  CHECK_FALSE(parse_error_file(R"([1,2])"));
  auto copied = nlohmann::json::parse(
      agent_error_file_json(R"({"message": {"message": "m"}})", "ignored", unix_time(1.0), 3));
  CHECK(copied["message"]["errorCode"] == 3);
  auto made = nlohmann::json::parse(agent_error_file_json("", "Signal 9", unix_time(5.0), -9));
  CHECK(made["message"]["message"] == "Signal 9");
  CHECK(made["message"]["extraInfo"]["timestamp"] == "5");
}

TEST_CASE("after SIGKILL, a worker is waited for until the limit, then counts as stuck") {
  using namespace std::chrono_literals;
  const WorkerClock::time_point killed{100s};
  const auto limit = 2s;
  WorkerRecord running;  // never killed: not waited for, however late
  WorkerRecord killed_one;
  killed_one.killed_at = killed;
  WorkerRecord killed_later;
  killed_later.killed_at = killed + 1500ms;
  WorkerRecord reaped = killed_one;
  reaped.exit = WorkerExit{-SIGKILL};
  WorkerRecord abandoned = killed_one;
  abandoned.abandoned = true;
  CHECK_FALSE(stuck_after_kill(running, killed + 1h, limit));
  CHECK_FALSE(stuck_after_kill(killed_one, killed + 1999ms, limit));
  CHECK(stuck_after_kill(killed_one, killed + 2s, limit));
  CHECK_FALSE(stuck_after_kill(reaped, killed + 1h, limit));
  CHECK_FALSE(stuck_after_kill(abandoned, killed + 1h, limit));  // given up once, never again
  CHECK(waited_for_after_kill(killed_one));
  CHECK_FALSE(waited_for_after_kill(running));
  CHECK_FALSE(waited_for_after_kill(reaped));
  CHECK_FALSE(waited_for_after_kill(abandoned));
  // The loop's timer: the earliest wait to end among the workers still waited for.
  CHECK(next_stuck_deadline({running, reaped, abandoned}, limit) == std::nullopt);
  CHECK(next_stuck_deadline({killed_later, running, killed_one}, limit) == killed + 2s);
  CHECK(next_stuck_deadline({killed_later, reaped}, limit) == killed + 3500ms);
}

TEST_CASE("an abandoned worker's report names it, its state and what to do about the host") {
  AbandonedWorker worker{1, 5, 4242, ddprun::common::Seconds(2.04), "D (disk sleep)"};
  CHECK(abandoned_worker_message(worker) ==
        "ddprun: worker rank 5 (local_rank 1, pid 4242) did not exit 2.0 s after SIGKILL "
        "(state: D (disk sleep)); abandoned, the agent goes on without it. It may be in "
        "uninterruptible kernel sleep (e.g. wedged on a GPU or NIC); the host may need to be "
        "recycled.");
}

TEST_CASE("a process's state is the State: line of /proc/PID/status") {
  CHECK(state_from_proc_status("Name:\tsleep\nUmask:\t0022\nState:\tD (disk sleep)\nTgid:\t7\n") ==
        "D (disk sleep)");
  CHECK(state_from_proc_status("State:\tt (tracing stop)") == "t (tracing stop)");
  CHECK(state_from_proc_status("Name:\tx\n") == std::nullopt);
  CHECK(state_from_proc_status("State:\t\n") == std::nullopt);
  CHECK(state_from_proc_status("") == std::nullopt);
  // This process runs; a pid that cannot exist has no state.
  CHECK(process_state(::getpid()).value_or("").starts_with("R (running)"));
  CHECK(process_state(-5) == std::nullopt);
}

TEST_CASE("a thread's state letter follows its command name in /proc/PID/task/TID/stat") {
  CHECK(state_from_proc_stat("4242 (sh) S 1 4242 4242 0 -1") == 'S');
  // The command name may hold blanks and parentheses: the state follows the last ')'.
  CHECK(state_from_proc_stat("7 (a) R (b)) R 1 7") == 'R');
  CHECK(state_from_proc_stat("7 (x) D") == 'D');
  CHECK(state_from_proc_stat("7 (x)") == std::nullopt);
  CHECK(state_from_proc_stat("7 (x)R") == std::nullopt);
  CHECK(state_from_proc_stat("no parenthesis R") == std::nullopt);
  CHECK(state_from_proc_stat("") == std::nullopt);
  // This thread runs; a pid that cannot exist has no runnable thread.
  CHECK(has_runnable_thread(::getpid()));
  CHECK_FALSE(has_runnable_thread(-5));
}

TEST_CASE("after a first failure the group's stop waits for the others' own failures") {
  using std::chrono::milliseconds;
  using Now = FailureGathering::Now;
  const FailureGathering gathering(milliseconds(8));  // the group started over 8 ms
  const auto min_wait = milliseconds(8) + FailureGathering::kSlack;
  const auto limit = FailureGathering::kLimit;
  SECTION("nothing left running: stop (report) at once, whatever the time") {
    for (auto since : {milliseconds(0), milliseconds(5), milliseconds(500)}) {
      CHECK(gathering.stop_now(Now{since, false, false}));
      CHECK(gathering.stop_now(Now{since, false, true}));
    }
  }
  SECTION("within the start spread and slack: wait, runnable or not, until its end") {
    for (bool runnable : {false, true}) {
      CHECK_FALSE(gathering.stop_now(Now{milliseconds(0), true, runnable}));
      CHECK_FALSE(gathering.stop_now(Now{min_wait - milliseconds(1), true, runnable}));
    }
    CHECK(gathering.look_again_after(Now{milliseconds(0), true, false}) == min_wait);
    CHECK(gathering.look_again_after(Now{milliseconds(3), true, true}) ==
          min_wait - milliseconds(3));
  }
  SECTION("after it: idle peers are stopped, runnable ones looked at again shortly") {
    CHECK(gathering.stop_now(Now{min_wait, true, false}));
    CHECK_FALSE(gathering.stop_now(Now{min_wait, true, true}));
    const auto again = gathering.look_again_after(Now{min_wait, true, true});
    CHECK(again > FailureGathering::Duration::zero());
    CHECK(again <= milliseconds(1));
  }
  SECTION("at the limit (torchrun's monitor interval) the stop goes out even to busy peers") {
    CHECK_FALSE(gathering.stop_now(Now{limit - milliseconds(1), true, true}));
    CHECK(gathering.stop_now(Now{limit, true, true}));
    CHECK(gathering.look_again_after(Now{limit - std::chrono::microseconds(300), true, true}) ==
          std::chrono::microseconds(300));
  }
  SECTION("a start spread beyond the limit is cut to it") {
    const FailureGathering slow_start(milliseconds(400));
    CHECK_FALSE(slow_start.stop_now(Now{limit - milliseconds(1), true, false}));
    CHECK(slow_start.stop_now(Now{limit, true, false}));
    CHECK(slow_start.look_again_after(Now{milliseconds(40), true, false}) ==
          limit - milliseconds(40));
  }
}

TEST_CASE("event lines are single JSON objects") {
  const std::string line = EventLog::format_line(12.5, "n1", "restart", {{"round", 2}});
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  auto event = nlohmann::json::parse(line);
  CHECK(event["event"] == "restart");
  CHECK(event["time"] == 12.5);
  CHECK(event["node"] == "n1");
  CHECK(event["round"] == 2);
}

TEST_CASE("programs are resolved through the worker's PATH") {
  CHECK(resolve_program("./x", {}) == "./x");
  CHECK(resolve_program("true", {{"PATH", "/nonexistent:/bin:/usr/bin"}}).ends_with("/true"));
  CHECK(resolve_program("no-such-program-xyz", {{"PATH", "/bin"}}) == "no-such-program-xyz");
}
