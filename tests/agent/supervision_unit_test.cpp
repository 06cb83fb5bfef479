// Pure parts of the agent: worker environment, prefixes, log layout, exit interpretation,
// run-loop decisions, failure summary, error files and event lines.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/error_file.hpp"
#include "agent/event_log.hpp"
#include "agent/failure_summary.hpp"
#include "agent/log_layout.hpp"
#include "agent/log_prefix.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_exit.hpp"
#include "agent/worker_process.hpp"

using namespace ddprun::agent;
using ddprun::launcher::LaunchConfig;

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
  LaunchConfig config;
  config.nproc_per_node = 2;
  config.max_restarts = 3;
  WorkerEnvInputs inputs{{{"PATH", "/bin"}, {"RANK", "stale"}}, 1, "/logs/1/error.json"};
  const EnvMap env = build_worker_env(config, two_node_round(), inputs);
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
  CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env.at("OMP_NUM_THREADS") == "1");
}

TEST_CASE("worker environment keeps inherited tuning and applies launcher overrides") {
  LaunchConfig config;
  config.nproc_per_node = 4;
  config.virtual_local_rank = true;
  config.worker_env_overrides = {{"EXTRA", "x"}};
  WorkerEnvInputs inputs{
      {{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}, 2, ""};
  const EnvMap env = build_worker_env(config, two_node_round(), inputs);
  CHECK(env.at("OMP_NUM_THREADS") == "8");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
  CHECK(env.at("LOCAL_RANK") == "0");  // --virtual_local_rank
  CHECK(env.at("RANK") == "4");
  CHECK(env.at("EXTRA") == "x");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE").empty());
}

TEST_CASE("a single worker per node gets no OMP_NUM_THREADS") {
  LaunchConfig config;
  const EnvMap env = build_worker_env(config, RoundInfo{}, WorkerEnvInputs{});
  CHECK_FALSE(env.contains("OMP_NUM_THREADS"));
}

TEST_CASE("prefix templates expand torchrun's placeholders and ddprun's hostname") {
  PrefixFields fields{"trainer", 5, 1, "node-a"};
  CHECK(expand_prefix_template(kDefaultPrefixTemplate, fields) == "[trainer1]:");
  CHECK(expand_prefix_template("[${rank}|$local_rank@${hostname}] ", fields) == "[5|1@node-a] ");
  CHECK(expand_prefix_template("${unknown} $$ ${rank", fields) == "${unknown} $ ${rank");
}

TEST_CASE("line prefixer keeps partial lines whole and flushes at the end") {
  LinePrefixer prefixer("[p]:");
  CHECK(prefixer.feed("hel") == "");
  CHECK(prefixer.feed("lo\nwor") == "[p]:hello\n");
  CHECK(prefixer.feed("ld\n\nx") == "[p]:world\n[p]:\n");
  CHECK(prefixer.finish() == "[p]:x\n");
  CHECK(prefixer.finish() == "");
}

TEST_CASE("line prefixer bounds a line without newline") {
  LinePrefixer prefixer(">", 4);
  CHECK(prefixer.feed("abcdefghij") == ">abcd\n>efgh\n");
  CHECK(prefixer.finish() == ">ij\n");
}

TEST_CASE("log plan follows redirects, tee and the local rank filter") {
  LaunchConfig config;
  config.nproc_per_node = 3;
  SECTION("default: console only, error file in the attempt directory") {
    auto plan = plan_worker_logs(config, "/l/attempt_0", 1);
    CHECK(plan.out.to_console);
    CHECK(plan.out.file.empty());
    CHECK(plan.error_file == "/l/attempt_0/1/error.json");
  }
  SECTION("redirect stdout: file only; tee stderr: file and console") {
    config.redirects.all = kStdOut;
    config.tee.all = kStdErr;
    auto plan = plan_worker_logs(config, "/l/attempt_2", 0);
    CHECK_FALSE(plan.out.to_console);
    CHECK(plan.out.file == "/l/attempt_2/0/stdout.log");
    CHECK(plan.err.to_console);
    CHECK(plan.err.file == "/l/attempt_2/0/stderr.log");
  }
  SECTION("per-rank map and filter") {
    config.tee.per_local_rank = {{2, 3}};
    config.local_ranks_filter = {0};
    auto rank2 = plan_worker_logs(config, "/l/a", 2);
    CHECK_FALSE(rank2.out.to_console);
    CHECK(rank2.out.file == "/l/a/2/stdout.log");
    auto rank1 = plan_worker_logs(config, "/l/a", 1);
    CHECK_FALSE(rank1.err.to_console);
    CHECK(rank1.err.file.empty());
    CHECK(plan_worker_logs(config, "/l/a", 0).out.to_console);
  }
  SECTION("file logging disabled") {
    config.redirects.all = 3;
    auto plan = plan_worker_logs(config, "", 0);
    CHECK(plan.out.file == "/dev/null");
    CHECK(plan.error_file.empty());
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
  WorkerFailure root{1000.0, "127.0.0.3", 2, 0, 3, 11, "", "boom"};
  WorkerFailure other{1001.0, "127.0.0.2", 0, 0, -15, 12, "/e.json", "line1\nline2"};
  const std::string text = format_failure_summary("train.py", {root, other});
  CHECK(text.find("train.py FAILED") != std::string::npos);
  CHECK(text.find("\n=====") != std::string::npos);
  CHECK(text.find(std::string(61, '=')) == std::string::npos);  // capped at 60
  const auto root_at = text.find("Root Cause (first observed failure):\n[0]:");
  REQUIRE(root_at != std::string::npos);
  CHECK(text.find("  host      : 127.0.0.3", root_at) != std::string::npos);
  CHECK(text.find("  rank      : 2 (local_rank: 0)") != std::string::npos);
  CHECK(text.find("  exitcode  : 3 (pid: 11)") != std::string::npos);
  CHECK(text.find("  error_file: <N/A>") != std::string::npos);
  CHECK(text.find("  traceback : line1\n  line2") < root_at);  // other failures come first
  const std::string alone = format_failure_summary("x", {root});
  CHECK(alone.find("<NO_OTHER_FAILURES>") != std::string::npos);
}

TEST_CASE("error files in torchrun's format") {
  auto parsed = parse_error_file(
      R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback...", "timestamp": "1700000000"}}})");
  REQUIRE(parsed);
  CHECK(parsed->message == "Traceback...");
  CHECK(parsed->timestamp_s == Approx(1700000000.0));
  CHECK(parse_error_file(R"({"message": "plain"})")->message == "plain");
  CHECK_FALSE(parse_error_file("not json"));
  CHECK_FALSE(parse_error_file(R"([1,2])"));
  auto copied = nlohmann::json::parse(
      agent_error_file_json(R"({"message": {"message": "m"}})", "ignored", 1.0, 3));
  CHECK(copied["message"]["errorCode"] == 3);
  auto made = nlohmann::json::parse(agent_error_file_json("", "Signal 9", 5.0, -9));
  CHECK(made["message"]["message"] == "Signal 9");
  CHECK(made["message"]["extraInfo"]["timestamp"] == "5");
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
