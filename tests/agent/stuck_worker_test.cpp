// A worker SIGKILL cannot end (uninterruptible sleep, D state): the real ddprun waits for it a
// bounded time (TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT), names it, abandons it and goes on:
// it exits after the failure, or restarts the group. The worker is really held (stuck_hold.hpp:
// a cgroup v1 freezer, else a ptrace tracer); a hold that cannot be had fails the test, which
// never passes without the stuck worker.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/workers/process_state.hpp"
#include "tests/agent/e2e_support.hpp"
#include "tests/agent/events_file.hpp"
#include "tests/agent/stuck_hold.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;
using ddprun::agent::process_state;
using namespace ddprun::agent::stuck;

namespace {

// In the first attempt local rank 0 publishes its pid and sleeps (to be held), and local rank 1
// fails once `go` exists; in later attempts both mark that they ran and succeed.
std::string write_worker_script(const TempDir& dir) {
  const std::string script = dir / "worker.sh";
  write_file(script,
             "#!/bin/sh\n"
             "if [ \"$TORCHELASTIC_RESTART_COUNT\" != 0 ]; then\n"
             "  touch '" +
                 dir.path() +
                 "'/ran_$LOCAL_RANK; exit 0\n"
                 "fi\n"
                 "case $LOCAL_RANK in\n"
                 "  0) echo $$ > '" +
                 dir.path() + "/pid0.tmp'; mv '" + dir.path() + "/pid0.tmp' '" + dir.path() +
                 "/pid0'; exec sleep 600;;\n"
                 "  1) while [ ! -e '" +
                 dir.path() +
                 "/go' ]; do sleep 0.05; done; exit 1;;\n"
                 "esac\n");
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

struct StuckRun {
  std::optional<int> exit_status;
  std::string output;
  pid_t stuck_pid = -1;
  std::string held_state;           // what the hold makes /proc/PID/status show
  std::string stuck_state_at_exit;  // the held worker's, once the agent had exited
  bool gone_after_release = false;  // and it died once the hold let it go
  std::vector<nlohmann::json> events;
};

// Two workers; worker 0 is held, then worker 1 fails: the stop's SIGTERM and SIGKILL (1 s
// apart) cannot end worker 0, and the agent has to go on without it.
StuckRun run_with_stuck_worker(HoldKind kind, int max_restarts) {
  TempDir dir;
  const std::string script = write_worker_script(dir);
  auto hold = std::make_unique<StuckHold>(kind);
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "2", "--max_restarts",
                 std::to_string(max_restarts), "--shutdown_timeout", "1", "--events-file",
                 dir / "events", "--no_python", script},
                dir / "agent.out", {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "2"}});
  StuckRun run;
  const bool published =
      wait_for_file(dir / "pid0", [](const std::string& text) { return !text.empty(); }, 60s);
  INFO(agent.output());
  REQUIRE(published);
  run.stuck_pid = std::stoi(read_file(dir / "pid0"));
  REQUIRE(wait_for_file(
      dir / "events",
      [](const std::string& text) { return text.find("workers_started") != std::string::npos; },
      10s));
  REQUIRE(latest_worker_pids(dir / "events").front() == run.stuck_pid);
  REQUIRE(hold->hold(run.stuck_pid));
  run.held_state = hold->stuck_state();
  write_file(dir / "go", "");
  run.exit_status = agent.wait_exit(90s);
  run.stuck_state_at_exit = process_state(run.stuck_pid).value_or("gone");
  run.output = agent.output();
  run.events = read_events(dir / "events");
  hold.reset();
  run.gone_after_release = wait_until_gone({run.stuck_pid}, 10000ms);
  if (max_restarts > 0) {
    CHECK(fs::exists(dir / "ran_0"));
    CHECK(fs::exists(dir / "ran_1"));
  }
  return run;
}

}  // namespace

TEST_CASE(
    "a worker SIGKILL cannot end is named and abandoned after the bound; the agent exits with "
    "the other worker's failure") {
  const HoldKind kind = GENERATE(HoldKind::kFreezer, HoldKind::kPtrace);
  const char* kind_name = kind == HoldKind::kFreezer ? "freezer" : "ptrace";
  INFO("hold: " << kind_name);
  const StuckRun run = run_with_stuck_worker(kind, 0);
  INFO(run.output);
  REQUIRE(run.exit_status == 1);
  // The agent did not wait for it: it was still held when the agent had exited.
  CHECK(run.stuck_state_at_exit == run.held_state);
  CHECK(run.gone_after_release);
  CHECK(reported_abandoned(run.output, run.stuck_pid, run.held_state).value_or(0) >= 2.0);
  CHECK_THAT(run.output, Catch::Contains("ddprun: worker rank 0 (local_rank 0, pid " +
                                         std::to_string(run.stuck_pid) + ") did not exit"));
  CHECK_THAT(run.output, Catch::Contains("the host may need to be recycled"));
  // The failure table names worker 1 as the root cause, and only it.
  CHECK_THAT(run.output, Catch::Contains("Root Cause (first observed failure):"));
  CHECK_THAT(run.output, Catch::Contains("  rank      : 1 (local_rank: 1)"));
  CHECK_THAT(run.output, Catch::Contains("  exitcode  : 1 (pid: "));
  CHECK_THAT(run.output, !Catch::Contains("rank      : 0 (local_rank: 0)"));
  const auto abandoned = events_named(run.events, "worker_abandoned");
  REQUIRE(abandoned.size() == 1);
  CHECK(abandoned[0]["pid"] == run.stuck_pid);
  CHECK(abandoned[0]["rank"] == 0);
  CHECK(abandoned[0]["local_rank"] == 0);
  CHECK(abandoned[0]["state"] == run.held_state);
  CHECK(abandoned[0]["seconds_since_kill"].get<double>() >= 2.0);
  const auto failures = events_named(run.events, "failure");
  REQUIRE(failures.size() == 1);
  CHECK(failures[0]["rank"] == 1);
  CHECK(failures[0]["exit_code"] == 1);
}

TEST_CASE("a worker SIGKILL cannot end does not keep the agent from restarting the group") {
  const StuckRun run = run_with_stuck_worker(HoldKind::kFreezer, 1);
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  CHECK(run.stuck_state_at_exit == run.held_state);
  CHECK(run.gone_after_release);
  CHECK(reported_abandoned(run.output, run.stuck_pid, run.held_state).value_or(0) >= 2.0);
  CHECK(events_named(run.events, "worker_abandoned").size() == 1);
  // The second attempt's workers are new ones, and they ran to the end.
  const auto started = events_named(run.events, "workers_started");
  REQUIRE(started.size() == 2);
  const auto second_pids = started[1]["pids"].get<std::vector<pid_t>>();
  CHECK(std::find(second_pids.begin(), second_pids.end(), run.stuck_pid) == second_pids.end());
  CHECK(events_named(run.events, "workers_succeeded").size() == 1);
}
