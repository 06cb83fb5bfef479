// The hang watchdogs in the real agent: the real ddprun binary, real workers. torchrun's file
// timer with PyTorch's own FileTimerClient (two agents, gloo), --watchdog-timeout with the
// bundled trainer stopped by SIGSTOP, and a worker writing garbage into the timer FIFO.
// Tests that need PyTorch 2.x fail without a venv that has it (CI always installs one); the
// bundled-trainer case skips, saying so, in a build configured without LibTorch.
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "agent/watchdog/hang/hang_responder.hpp"
#include "events_file.hpp"
#include "rendezvous/round/machine_config.hpp"
#include "watchdog_support.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;
using ddprun::agent::watchdog_test::kNoTorchPython;
using ddprun::agent::watchdog_test::torch_python;
using nlohmann::json;

namespace {

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(needle) != std::string::npos)
      found.push_back(line);
  }
  return found;
}

// Figures go to the test's output, so a ctest -V run shows them.
void record(const std::string& what) {
  std::printf("watchdog_e2e: %s\n", what.c_str());
  std::fflush(stdout);
}

// The command line of one of two agents on 127.0.0.2 and .3 forming a c10d rendezvous at
// 127.0.0.2:port (node 2 hosts the store), followed by `rest`.
std::vector<std::string> two_node_agent(const std::string& port, int node,
                                        const std::string& run_id, std::vector<std::string> rest) {
  std::vector<std::string> argv =
      two_node_c10d_agent(static_cast<uint16_t>(std::stoi(port)), node, run_id, 1);
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

}  // namespace

TEST_CASE(
    "file timer: an expired scope is captured and reported; its worker is killed and restarts") {
  const std::optional<std::string> python = torch_python();
  if (!python) {
    FAIL(kNoTorchPython);
  }
  TempDir dir;
  // Rank 1's first attempt hangs inside a timer scope; rank 0 waits for it in a barrier.
  write_file(dir / "worker.py", R"(import os, sys, time
import torch.distributed as dist
from torch.distributed.elastic.timer import FileTimerClient, configure, expires

def stuck_in_critical_section():
    time.sleep(600)

out = sys.argv[1]
rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo")
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
if rank == 1 and attempt == 0:
    open(f"{out}/enter-{rank}", "w").write(f"{time.time():.6f}")
    with expires(after=2):
        stuck_in_critical_section()
dist.barrier()
open(f"{out}/done-{rank}-{attempt}", "w").write("ok")
dist.destroy_process_group()
)");
  const std::string port = std::to_string(free_port("127.0.0.2"));
  std::vector<std::unique_ptr<Process>> agents;
  for (int node : {2, 3}) {
    const std::string name = std::to_string(node);
    agents.push_back(std::make_unique<Process>(
        two_node_agent(
            port, node, "filetimer",
            {"--max_restarts", "1", "--shutdown_timeout", "3", "--log_dir", dir / ("logs-" + name),
             "--events-file", dir / ("events-" + name), dir / "worker.py", dir.path()}),
        dir / ("agent-" + name),
        std::map<std::string, std::string>{{"PYTHON_EXEC", *python},
                                           {"OMP_NUM_THREADS", "1"},
                                           {"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}));
  }
  for (auto& agent : agents) {
    const auto status = agent->wait_exit(55s);
    INFO(agent->output());
    REQUIRE(status == 0);
  }
  // The node of rank 1 reported the hang; the other saw only the restart.
  std::string hung_node;
  for (const std::string node : {"2", "3"}) {
    if (!events_named(dir / ("events-" + node), "hang").empty())
      hung_node = node;
  }
  INFO(agents[0]->output());
  INFO(agents[1]->output());
  REQUIRE(!hung_node.empty());
  const auto hangs = events_named(dir / ("events-" + hung_node), "hang");
  REQUIRE(hangs.size() == 1);
  const json& hang = hangs.front();
  REQUIRE(hang["hung"].size() == 1);
  const json& rank = hang["hung"][0];
  CHECK(rank["rank"] == 1);
  CHECK(rank["cause"] == "timer_expired");
  CHECK(rank["signal"] == SIGKILL);

  // Killed within the watchdog's own bounds of the expiry (2 s after entering the scope): this
  // node's capture (kHangCaptureLimit), then the other node's (peer_stacks_wait). Both are
  // about a second on an idle machine; the figure is recorded, the bound is what is promised.
  const double entered = std::stod(read_file(dir / "enter-1"));
  const auto failures = events_named(dir / ("events-" + hung_node), "failure");
  REQUIRE(!failures.empty());
  const double reported = hang["time"].get<double>() - (entered + 2.0);
  const double killed = failures.front()["time"].get<double>() - (entered + 2.0);
  record("file timer: expiry -> hang reported " + std::to_string(reported) +
         " s, -> kill observed " + std::to_string(killed) + " s");
  const double bound = (std::chrono::duration<double>(ddprun::agent::kHangCaptureLimit) +
                        ddprun::rendezvous::round::MachineConfig{}.peer_stacks_wait)
                           .count();
  CHECK(killed < bound);
  CHECK(failures.front()["exit_code"] == -SIGKILL);

  // The stacks of every local rank, and the sleeping rank's names the frame it sleeps in.
  const std::string stacks_dir = hang["stacks_dir"];
  CHECK(stacks_dir.find("/attempt_0/stacks") != std::string::npos);
  CHECK(fs::exists(fs::path(stacks_dir) / "rank1.txt"));
  const std::string stack_file = rank["stack_file"];
  CHECK(read_file(stack_file).find("stuck_in_critical_section") != std::string::npos);
  bool frame_named = false;
  for (const auto& frame : rank["top_frames"])
    frame_named = frame_named || frame["function"] == "stuck_in_critical_section";
  CHECK(frame_named);

  // One stderr line names the rank, the cause and the frame; the failure table names the hang.
  const std::string output = agents[hung_node == "2" ? 0 : 1]->output();
  const auto lines = lines_with(output, ") hung: file-timer scope");
  REQUIRE(lines.size() == 1);
  record(lines[0]);
  CHECK(lines[0].starts_with("ddprun: rank 1 (local_rank 0, pid "));
  CHECK(lines[0].find("stuck_in_critical_section") != std::string::npos);
  CHECK(failures.front()["message"].get<std::string>().starts_with("hung: file-timer scope"));

  // The other node captured its rank's stacks before the kill, while rank 0 still waited in
  // the barrier for rank 1.
  const std::string peer_node = hung_node == "2" ? "3" : "2";
  const auto peer_stacks = events_named(dir / ("events-" + peer_node), "peer_stacks");
  REQUIRE(peer_stacks.size() == 1);
  CHECK(peer_stacks.front()["time"].get<double>() < failures.front()["time"].get<double>());
  const std::string peer_dir = peer_stacks.front()["stacks_dir"];
  CHECK(peer_dir.find("logs-" + peer_node) != std::string::npos);
  CHECK(peer_dir.find("/attempt_0/stacks") != std::string::npos);
  REQUIRE(fs::exists(fs::path(peer_dir) / "rank0.txt"));
  CHECK(read_file(fs::path(peer_dir) / "rank0.txt").find("barrier") != std::string::npos);
  const std::string peer_output = agents[peer_node == "2" ? 0 : 1]->output();
  CHECK(lines_with(peer_output, "a worker hung on another node (").size() == 1);

  // Restarted once, finished on both ranks.
  CHECK(fs::exists(dir / "done-0-1"));
  CHECK(fs::exists(dir / "done-1-1"));
  CHECK_FALSE(fs::exists(dir / "done-0-0"));
}

// Needs the bundled trainer, built only with LibTorch: without it, tests/agent/watchdog.cmake
// filters this case out; where it runs, a missing trainer is a failure.
TEST_CASE("watchdog timeout: a stopped trainer is reported and killed; the job restarts",
          "[trainer]") {
  INFO("no ddprun-train in " DDPRUN_BIN_DIR);
  REQUIRE(::access((std::string(DDPRUN_BIN_DIR) + "/ddprun-train").c_str(), X_OK) == 0);
  TempDir dir;
  const std::string trainer_log = dir / "agent";
  // About 20 ms a step here (4 s an attempt): the first attempt is still running, by a wide
  // margin, when the test stops it after its first step; a tinier model finishes in 0.3 s.
  std::vector<std::string> argv{ddprun_binary(),
                                "--standalone",
                                "--nproc_per_node",
                                "1",
                                "--max_restarts",
                                "1",
                                "--shutdown_timeout",
                                "3",
                                "--watchdog-timeout",
                                "2",
                                "--log_dir",
                                dir / "logs",
                                "--events-file",
                                dir / "events",
                                "train",
                                "gpt_config.n_layer=2",
                                "gpt_config.n_head=2",
                                "gpt_config.n_embd=64",
                                "data_config.block_size=64",
                                "trainer_config.batch_size=32",
                                "trainer_config.eval_batches=1",
                                "trainer_config.log_every=1",
                                "trainer_config.save_every=1",
                                "trainer_config.max_epochs=1",
                                "trainer_config.steps_per_epoch=200",
                                "trainer_config.snapshot_path=" + (dir / "snapshot.pt")};
  Process agent(argv, trainer_log, {{"OMP_NUM_THREADS", "1"}});
  // The first step has been logged, so the trainer has heartbeat (it beats before logging).
  REQUIRE(wait_for_file(
      dir / "events",
      [](const std::string& text) { return text.find("\"workers_started\"") != std::string::npos; },
      30s));
  const pid_t trainer = events_named(dir / "events", "workers_started").front()["pids"][0];
  REQUIRE(wait_for_file(
      trainer_log,
      [](const std::string& text) { return text.find("| iter 1/") != std::string::npos; }, 30s));
  ::kill(trainer, SIGSTOP);
  const auto stopped_at = std::chrono::system_clock::now();

  const auto status = agent.wait_exit(55s);
  INFO(agent.output());
  REQUIRE(status == 0);
  const auto hangs = events_named(dir / "events", "hang");
  REQUIRE(hangs.size() == 1);
  const json& rank = hangs.front()["hung"][0];
  CHECK(rank["rank"] == 0);
  CHECK(rank["pid"] == trainer);
  CHECK(rank["cause"] == "no_heartbeat");
  CHECK(rank["timeout_s"] == 2.0);
  const double stopped_s = std::chrono::duration<double>(stopped_at.time_since_epoch()).count();
  record("watchdog: SIGSTOP -> hang reported " +
         std::to_string(hangs.front()["time"].get<double>() - stopped_s) + " s (timeout 2 s)");
  // The report says what the capture did, frames or not; it does not hang on a stopped process.
  const auto lines = lines_with(agent.output(), ") hung: no heartbeat for ");
  REQUIRE(lines.size() == 1);
  record(lines[0]);
  CHECK(lines[0].starts_with("ddprun: rank 0 (local_rank 0, pid " + std::to_string(trainer)));
  CHECK((lines[0].find("eu-stack ") != std::string::npos ||
         lines[0].find("gdb ") != std::string::npos ||
         lines[0].find("no stack tool found") != std::string::npos));
  const auto failures = events_named(dir / "events", "failure");
  REQUIRE(failures.size() == 1);
  CHECK(failures[0]["exit_code"] == -SIGKILL);
  CHECK(failures[0]["message"].get<std::string>().starts_with("hung: no heartbeat for "));
  CHECK(events_named(dir / "events", "workers_started").size() == 2);
}

TEST_CASE("file timer: malformed requests in the FIFO give one warning; the job succeeds") {
  TempDir dir;
  // Two workers write garbage, then wait (bounded) until the agent has said something about it.
  const std::string script =
      "printf 'not json\\n{\"version\":1}\\n\\n{{{\\n' > \"$TORCHELASTIC_TIMER_FILE\";"
      "i=0; while ! grep -q 'malformed' \"$AGENT_OUT\" && [ $i -lt 400 ]; do"
      "  sleep 0.05; i=$((i+1)); done; exit 0";
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "2", "--events-file",
                 dir / "events", "--no_python", "/bin/sh", "-c", script},
                dir / "agent",
                {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                 {"AGENT_OUT", dir / "agent"},
                 {"OMP_NUM_THREADS", "1"}});
  const auto status = agent.wait_exit(55s);
  INFO(agent.output());
  REQUIRE(status == 0);
  const auto warnings = lines_with(agent.output(), "ddprun: warning:");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("malformed request") != std::string::npos);
  CHECK(events_named(dir / "events", "hang").empty());
  CHECK(events_named(dir / "events", "failure").empty());
}

TEST_CASE("watchdog timeout: restarts exhausted, every node's failure table names the hung rank") {
  TempDir dir;
  // Rank 1 beats once (armed), then sleeps without beating; no restart is allowed.
  const std::string port = std::to_string(free_port("127.0.0.2"));
  std::vector<std::unique_ptr<Process>> agents;
  for (int node : {2, 3}) {
    const std::string name = std::to_string(node);
    agents.push_back(std::make_unique<Process>(
        two_node_agent(port, node, "silent",
                       {"--watchdog-timeout", "1", "--shutdown_timeout", "3", "--log_dir",
                        dir / ("logs-" + name), "--no_python", "/bin/sh", "-c",
                        "if [ $RANK = 1 ]; then printf . >&3; fi; exec sleep 60"}),
        dir / ("agent-" + name), std::map<std::string, std::string>{{"OMP_NUM_THREADS", "1"}}));
  }
  int hung_lines = 0;
  int peer_lines = 0;
  for (auto& agent : agents) {
    const auto status = agent->wait_exit(30s);
    const std::string output = agent->output();
    INFO(output);
    REQUIRE(status == 1);
    const auto root = output.find("Root Cause (first observed failure):");
    REQUIRE(root != std::string::npos);
    const std::string table = output.substr(root);
    CHECK(table.find("rank      : 1 (local_rank: 0)") != std::string::npos);
    CHECK(table.find("exitcode  : -9") != std::string::npos);
    CHECK(table.find("traceback : hung: no heartbeat for ") != std::string::npos);
    CHECK(table.find("stuck at: ") != std::string::npos);
    CHECK(table.find("/attempt_0/stacks/rank1.txt") != std::string::npos);
    hung_lines += static_cast<int>(lines_with(output, ") hung: no heartbeat for ").size());
    // The other node's rank, captured before the kill, where it was (rank 0 of node 2 or 3).
    for (const std::string& line : lines_with(output, "a worker hung on another node; ")) {
      ++peer_lines;
      const std::string marker = "this node's stacks: ";
      const std::string peer_dir = line.substr(line.find(marker) + marker.size());
      CHECK(peer_dir.ends_with("/attempt_0/stacks"));
      CHECK(fs::exists(fs::path(peer_dir) / "rank0.txt"));
    }
  }
  CHECK(hung_lines == 1);  // the stderr line is the hung rank's own node's
  CHECK(peer_lines == 1);  // and the other node says where its stacks are
}

TEST_CASE("watchdog timeout: with --log_dir /dev/null the stacks go to a temporary folder") {
  TempDir dir;
  Process agent(
      {ddprun_binary(), "--standalone", "--nproc_per_node", "1", "--watchdog-timeout", "1",
       "--log_dir", "/dev/null", "--no_python", "/bin/sh", "-c", "printf . >&3; exec sleep 60"},
      dir / "agent", {{"OMP_NUM_THREADS", "1"}, {"TMPDIR", dir.path()}});
  const auto status = agent.wait_exit(30s);
  INFO(agent.output());
  REQUIRE(status == 1);
  const auto lines = lines_with(agent.output(), ") hung: no heartbeat for ");
  REQUIRE(lines.size() == 1);
  const std::string marker = "; stacks: " + dir.path() + "/ddprun_stacks_";
  const auto at = lines[0].find(marker);
  REQUIRE(at != std::string::npos);
  const std::string stack_file = lines[0].substr(at + 10, lines[0].find(' ', at + 10) - at - 10);
  CHECK(stack_file.ends_with("/stacks/rank0.txt"));
  CHECK(fs::exists(stack_file));  // kept after the agent exits: it is the evidence
}
