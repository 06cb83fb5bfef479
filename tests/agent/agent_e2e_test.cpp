// End-to-end tests of the real ddprun binary: nodes are agents on 127.0.0.2, 127.0.0.3, ...
// (--local_addr) forming a c10d rendezvous on loopback; workers are small shell scripts.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "e2e_support.hpp"
#include "events_file.hpp"
#include "terminal_run.hpp"
#include "tests/rendezvous/child_process.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

struct Job {
  TempDir dir;
  uint16_t port = free_port("127.0.0.2");
  std::string nnodes = "2";
  int max_restarts = 0;
  std::string rdzv_conf = kFastRdzv;
  std::string script;  // the worker: /bin/sh -c script, with $DIR set to dir

  std::vector<std::string> agent_argv(int node) const {
    return {ddprun_binary(), "--nnodes", nnodes, "--nproc_per_node", "2", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", "127.0.0.2:" + std::to_string(port), "--rdzv_id", "e2e",
            "--rdzv_conf",
            // Agents of one machine may all host a loopback endpoint (the first bind wins, as
            // torchrun): pin the host so the tests know which agent a kill takes the store with.
            rdzv_conf + (node == 2 ? ",is_host=1" : ",is_host=0"), "--local_addr",
            "127.0.0." + std::to_string(node), "--max_restarts", std::to_string(max_restarts),
            "--shutdown_timeout", "3", "--events-file", events(node), "--no_python", "/bin/sh",
            "-c", script};
  }
  std::string events(int node) const { return dir / ("events-" + std::to_string(node)); }
  std::unique_ptr<Process> start(int node) const {
    return std::make_unique<Process>(
        agent_argv(node), dir / ("agent-" + std::to_string(node)),
        std::map<std::string, std::string>{{"DIR", dir.path()}, {"OMP_NUM_THREADS", "1"}});
  }
};

// Nodes 2 and 3 of `job` with their --rdzv_endpoint replaced by `endpoint` and --rdzv_conf by
// `rdzv_conf` (no is_host pin unless it says so): both must finish with 0.
void run_two_agents_at(const Job& job, const std::string& endpoint, const std::string& rdzv_conf) {
  auto argv_for = [&](int node) {
    std::vector<std::string> argv = job.agent_argv(node);
    for (auto& arg : argv) {
      if (arg == "127.0.0.2:" + std::to_string(job.port))
        arg = endpoint;
      if (arg.find("is_host=") != std::string::npos)
        arg = rdzv_conf;
    }
    return argv;
  };
  Process a(argv_for(2), job.dir / "a");
  Process b(argv_for(3), job.dir / "b");
  INFO(a.output());
  INFO(b.output());
  CHECK(a.wait_exit(30s) == 0);
  CHECK(b.wait_exit(30s) == 0);
}

// The agent has set up its event loop once it blocks SIGTERM (read through its signalfd).
bool blocks_sigterm(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> (SIGTERM - 1)) & 1U;
    }
  }
  return false;
}

bool has_round_of_size(const std::string& events_path, int nodes, std::size_t after_count) {
  auto rounds = events_named(events_path, "workers_started");
  for (std::size_t i = after_count; i < rounds.size(); ++i) {
    if (rounds[i]["group_world_size"] == nodes)
      return true;
  }
  return false;
}

// `line` is a whole line of text: at its start or after a newline, and ending in one.
bool has_line(const std::string& text, const std::string& line) {
  return text.starts_with(line + "\n") || text.find("\n" + line + "\n") != std::string::npos;
}

std::string root_cause_block(const std::string& output) {
  auto at = output.find("Root Cause (first observed failure):");
  if (at == std::string::npos)
    return {};
  auto end = output.find("\n=", at);
  return output.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

TEST_CASE(
    "a worker crash restarts the whole job; exhausted, every node shows the same root cause") {
  Job job;
  job.max_restarts = 1;
  // Rank 3 fails in every attempt, once the others have recorded the attempt (the agents stop
  // the survivors of a failure, possibly before their first line); the others run until stopped.
  job.script =
      "echo \"$TORCHELASTIC_RESTART_COUNT\" >> $DIR/attempts-$RANK;"
      "if [ $RANK = 3 ]; then"
      "  while [ \"$(cat $DIR/attempts-0 $DIR/attempts-1 $DIR/attempts-2 2>/dev/null |"
      "           grep -c \"^$TORCHELASTIC_RESTART_COUNT\\$\")\" -lt 3 ]; do sleep 0.02; done;"
      "  echo crashing >&2; exit 7;"
      "fi; exec sleep 60";
  auto a = job.start(2);
  auto b = job.start(3);
  auto status_a = a->wait_exit(60s);
  auto status_b = b->wait_exit(60s);
  INFO(a->output());
  INFO(b->output());
  REQUIRE(status_a == 1);
  REQUIRE(status_b == 1);
  // Both attempts ran on every rank, with the job-wide restart count.
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(read_file(job.dir / ("attempts-" + std::to_string(rank))) == "0\n1\n");
  }
  const std::string root_a = root_cause_block(a->output());
  CHECK(root_a.find("rank      : 3 (local_rank: 1)") != std::string::npos);
  CHECK(root_a.find("exitcode  : 7") != std::string::npos);
  CHECK(root_a.find("host      : 127.0.0.3") != std::string::npos);
  CHECK(root_a == root_cause_block(b->output()));
  // Workers write to their agent's own stderr, unprefixed, as under torchrun without --tee.
  CHECK(a->output().find("crashing") == std::string::npos);
  CHECK(has_line(b->output(), "crashing"));
  CHECK(b->output().find("[default1]:") == std::string::npos);
  CHECK(events_named(job.events(2), "restart").size() == 1);
  CHECK(events_named(job.events(3), "restart").size() == 1);
  // One line per event in ddprun's words: the failure, and the restart with attempts left.
  CHECK(b->output().find("ddprun: worker rank 3 (local_rank 1, pid ") != std::string::npos);
  CHECK(b->output().find("failed: exit code 7") != std::string::npos);
  CHECK(a->output().find("restart 1 of 1 (0 left)") != std::string::npos);
  CHECK(events_named(job.events(3), "failure").size() == 2);
}

TEST_CASE(
    "nnodes 2:3: a SIGKILLed agent takes its workers along, the rest re-form, and grow back") {
  Job job;
  job.nnodes = "2:3";
  job.script = "while [ ! -f $DIR/stop ]; do sleep 0.05; done";
  auto a = job.start(2);
  auto b = job.start(3);
  auto c = job.start(4);
  auto full_round = [&](std::size_t after) {
    return [&job, after](const std::string&) { return has_round_of_size(job.events(2), 3, after); };
  };
  REQUIRE(wait_for_file(job.events(2), full_round(0), 30s));
  REQUIRE(wait_for_file(
      job.events(4), [](const std::string& t) { return !t.empty(); }, 10s));
  REQUIRE(wait_for_lines(job.events(4), 2, 10s));
  const std::vector<pid_t> victims = latest_worker_pids(job.events(4));
  REQUIRE(victims.size() == 2);

  const auto rounds_before = events_named(job.events(2), "workers_started").size();
  c->signal(SIGKILL);
  REQUIRE(c->wait_exit(5s) == 128 + SIGKILL);
  CHECK(wait_until_gone(victims, 1000ms));  // PDEATHSIG: no orphans

  // Survivors notice the lost heartbeat and re-form as two nodes (not a restart).
  REQUIRE(wait_for_file(
      job.events(2),
      [&](const std::string&) { return has_round_of_size(job.events(2), 2, rounds_before); }, 20s));
  CHECK(events_named(job.events(2), "membership_change").size() >= 1);
  CHECK(events_named(job.events(2), "restart").empty());

  const auto rounds_two = events_named(job.events(2), "workers_started").size();
  auto d = job.start(5);
  REQUIRE(wait_for_file(job.events(2), full_round(rounds_two), 30s));
  for (const auto& started : events_named(job.events(2), "workers_started")) {
    CHECK(started["restart_count"] == 0);
  }

  write_file(job.dir / "stop", "");
  CHECK(a->wait_exit(30s) == 0);
  CHECK(b->wait_exit(30s) == 0);
  CHECK(d->wait_exit(30s) == 0);
}

TEST_CASE("SIGTERM to every ddprun reaches the workers; nothing is left; exit 128+15") {
  Job job;
  job.script =
      "trap 'echo $RANK > $DIR/term-$RANK; exit 0' TERM; echo $$ > $DIR/pid-$RANK;"
      "while :; do sleep 0.05; done";
  auto a = job.start(2);
  auto b = job.start(3);
  for (int rank = 0; rank < 4; ++rank) {
    REQUIRE(wait_for_lines(job.dir / ("pid-" + std::to_string(rank)), 1, 30s));
  }
  // A worker can run before its agent has logged it: wait for round_formed + workers_started.
  REQUIRE(wait_for_lines(job.events(2), 2, 30s));
  REQUIRE(wait_for_lines(job.events(3), 2, 30s));
  std::vector<pid_t> workers = latest_worker_pids(job.events(2));
  for (pid_t pid : latest_worker_pids(job.events(3)))
    workers.push_back(pid);
  REQUIRE(workers.size() == 4);
  a->signal(SIGTERM);
  b->signal(SIGTERM);
  auto status_a = a->wait_exit(15s);
  auto status_b = b->wait_exit(15s);
  INFO(a->output());
  INFO(b->output());
  CHECK(status_a == 128 + SIGTERM);
  CHECK(status_b == 128 + SIGTERM);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(read_file(job.dir / ("term-" + std::to_string(rank))) == std::to_string(rank) + "\n");
  }
  CHECK(wait_until_gone(workers, 1000ms));
  auto exits = events_named(job.events(2), "exit");
  REQUIRE(exits.size() == 1);
  CHECK(exits[0]["exit_code"] == 143);
}

TEST_CASE("bad input: an unreachable endpoint and mismatched --nnodes fail clearly") {
  SECTION("nobody hosts the store") {
    Job job;
    job.rdzv_conf = "join_timeout=3,read_timeout=3";
    job.script = "true";
    auto args = job.agent_argv(3);
    // The endpoint host is not this agent's address, so it is a client of nobody.
    Process agent(args, job.dir / "agent");
    auto status = agent.wait_exit(30s);
    INFO(agent.output());
    CHECK(status == 1);
    CHECK(agent.output().find("127.0.0.2:" + std::to_string(job.port)) != std::string::npos);
  }
  SECTION("agents disagree on --nnodes") {
    Job job;
    job.rdzv_conf = "join_timeout=10,last_call_timeout=0.5";
    job.script = "true";
    auto a = job.start(2);
    job.nnodes = "3";
    auto b = job.start(3);
    auto status_b = b->wait_exit(30s);
    auto status_a = a->wait_exit(30s);
    INFO(a->output());
    INFO(b->output());
    CHECK(status_b == 1);
    CHECK(status_a == 1);
    // Whichever agent reads the other's record first names the mismatch; the other then loses
    // the store (or its peer) and fails too.
    CHECK((a->output() + b->output()).find("disagree on --nnodes") != std::string::npos);
  }
}

TEST_CASE("logs: prefixes, template, --tee, --local_ranks_filter, --log_dir layout, error files") {
  TempDir dir;
  const std::string log_dir = dir / "logs";
  // Rank 1 fails only after rank 0 has written both lines (a FIFO hand-off): the agent stops
  // the survivors of a failed group, and rank 0 must not be stopped half-way through its output.
  const std::string fifo = dir / "rank0-done";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string script =
      "echo out-$RANK; echo err-$RANK >&2;"
      "if [ $LOCAL_RANK = 0 ]; then echo done > " +
      fifo +
      "; fi;"
      "if [ $LOCAL_RANK = 1 ]; then read done < " +
      fifo +
      "; printf '%s' '{\"message\": {\"message\": \"ValueError: bad "
      "batch\", \"extraInfo\": {\"py_callstack\": \"Traceback: bad batch\", \"timestamp\": "
      "\"1700000000\"}}}' > $TORCHELASTIC_ERROR_FILE; exit 2; fi";
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "2", "--log_dir", log_dir,
                 "--tee", "1", "--local_ranks_filter", "0", "--events-file", dir / "events",
                 "--no_python", "/bin/sh", "-c", script},
                dir / "out",
                {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${hostname}:${rank}/${local_rank}]:"},
                 {"TORCHELASTIC_ERROR_FILE", dir / "agent_error.json"},
                 {"OMP_NUM_THREADS", "1"}});
  REQUIRE(agent.wait_exit(30s) == 1);
  const std::string out = agent.output();
  INFO(out);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(out.find(std::string("[") + host + ":0/0]:out-0\n") != std::string::npos);
  CHECK(has_line(out, "err-0"));                  // stderr is not tee'd: no prefix
  CHECK(out.find("out-1") == std::string::npos);  // filtered from the console ...
  CHECK(out.find("err-1") == std::string::npos);
  // ... but its tee'd stream is in torchrun's layout.
  std::string attempt;
  for (const auto& run : fs::directory_iterator(log_dir))
    attempt = run.path() / "attempt_0";
  CHECK(read_file(attempt + "/1/stdout.log") == "out-1\n");
  CHECK(read_file(attempt + "/0/stdout.log") == "out-0\n");
  CHECK_FALSE(fs::exists(attempt + "/0/stderr.log"));
  // The summary reads the worker's error file; the agent's own error file gets a copy.
  CHECK(out.find("traceback : Traceback: bad batch") != std::string::npos);
  CHECK(out.find("error_file: " + attempt + "/1/error.json") != std::string::npos);
  auto agent_error = json::parse(read_file(dir / "agent_error.json"));
  CHECK(agent_error["message"]["errorCode"] == 2);
  std::vector<std::string> names;
  for (auto& event : read_events(dir / "events"))
    names.push_back(event["event"]);
  CHECK(names == std::vector<std::string>{"round_formed", "workers_started", "failure", "exit"});
}

TEST_CASE("by default workers write to the agent's own terminal, as torchrun's do") {
  // Each worker reports whether its stdout and stderr are a terminal.
  const std::vector<std::string> worker = {
      "--no_python", "/bin/sh", "-c",
      "[ -t 1 ] && o=tty || o=pipe; [ -t 2 ] && e=tty || e=pipe; "
      "echo \"rank$LOCAL_RANK out=$o err=$e\""};
  auto run = [&](std::vector<std::string> options) {
    std::vector<std::string> argv = {ddprun_binary(), "--standalone", "--nproc_per_node", "2"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), worker.begin(), worker.end());
    TerminalRun result = run_in_terminal(argv);
    INFO(result.output);
    CHECK(result.status == 0);
    return result.output;
  };
  SECTION("default: no pipe, no prefix") {
    const std::string out = run({});
    CHECK(has_line(out, "rank0 out=tty err=tty"));
    CHECK(has_line(out, "rank1 out=tty err=tty"));
  }
  SECTION("--tee 3: through the agent, prefixed") {
    const std::string out = run({"--tee", "3"});
    CHECK(has_line(out, "[default0]:rank0 out=pipe err=pipe"));
    CHECK(has_line(out, "[default1]:rank1 out=pipe err=pipe"));
  }
  SECTION("--local-ranks-filter without --tee: the shown rank keeps the terminal") {
    const std::string out = run({"--local-ranks-filter", "1"});
    CHECK(has_line(out, "rank1 out=tty err=tty"));
    CHECK(out.find("rank0") == std::string::npos);
  }
  SECTION("--tee 1 with the filter: only stdout of the shown rank is tee'd") {
    const std::string out = run({"--tee", "1", "--local-ranks-filter", "1"});
    CHECK(has_line(out, "[default1]:rank1 out=pipe err=tty"));
    CHECK(out.find("rank0") == std::string::npos);
  }
}

TEST_CASE("--tee: a partial line reaches the console before its newline") {
  TempDir dir;
  const std::string fifo = dir / "go";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The worker prints a prompt without a newline and waits until the test has seen it.
  Process agent({ddprun_binary(), "--standalone", "--tee", "3", "--no_python", "/bin/sh", "-c",
                 "printf 'prompt> '; read x < " + fifo + "; echo answered"},
                dir / "out");
  const bool prompt_shown = wait_for_file(
      dir / "out",
      [](const std::string& text) { return text.find("[default0]:prompt> ") != std::string::npos; },
      20s);
  INFO(agent.output());
  CHECK(prompt_shown);
  std::ofstream(fifo) << "go\n";  // releases the worker either way
  REQUIRE(agent.wait_exit(30s) == 0);
  CHECK(agent.output().find("[default0]:prompt> answered\n") != std::string::npos);
}

TEST_CASE("the failure table lists every failed rank under the entry point as given") {
  TempDir dir;
  const std::string fifo = dir / "handoff";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Local ranks 1 and 2 fail at the same moment (a FIFO hand-off); rank 0 would run on.
  const std::string as_given = write_two_failing_ranks_script(dir, fifo);
  // The group stops at rank 1's failure; rank 2's exit 4 is its own, not the stop's: listed.
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "3", "--no_python", as_given},
                dir / "out", {{"OMP_NUM_THREADS", "1"}});
  REQUIRE(agent.wait_exit(60s) == 1);
  const std::string out = agent.output();
  INFO(out);
  CHECK(out.find("\n" + as_given + " FAILED\n") != std::string::npos);
  CHECK(out.find("<NO_OTHER_FAILURES>") == std::string::npos);
  CHECK(out.find("  rank      : 1 (local_rank: 1)\n  exitcode  : 3 (pid: ") != std::string::npos);
  CHECK(out.find("  rank      : 2 (local_rank: 2)\n  exitcode  : 4 (pid: ") != std::string::npos);
  CHECK(out.find("(local_rank: 0)") == std::string::npos);  // stopped by the agent: no failure
}

// The entries of a failure table ("  host      : H\n  rank      : R (local_rank: L)\n
// exitcode  : C"), as R -> C; only those of host H when one is given.
std::map<int, int> listed_failures(const std::string& out, const std::string& only_host = "") {
  std::map<int, int> listed;
  const std::string host_key = "  host      : ";
  for (auto at = out.find(host_key); at != std::string::npos; at = out.find(host_key, at + 1)) {
    const auto host_end = out.find('\n', at);
    const std::string host = out.substr(at + host_key.size(), host_end - at - host_key.size());
    const auto rank_at = out.find("  rank      : ", host_end);
    const auto code_at = out.find("  exitcode  : ", host_end);
    if (rank_at == std::string::npos || code_at == std::string::npos)
      break;
    if (only_host.empty() || host == only_host)
      listed[std::stoi(out.substr(rank_at + 14))] = std::stoi(out.substr(code_at + 14));
  }
  return listed;
}

// A few milliseconds of work in the shell (2,000 iterations): runnable all along, so the agent
// waits for its end before it stops the group (agent/workers/failure_gathering.hpp).
const std::string kBusyLoop = "i=0; while [ $i -lt 2000 ]; do i=$((i + 1)); done";

TEST_CASE("ranks failing together are each listed, with their own exit codes") {
  SECTION("4 ranks exit 3 at one instant: all 4 in the table and on the console, 20 runs of 20") {
    for (int run = 0; run < 20; ++run) {
      TempDir dir;
      WorkerGate gate(dir);
      Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "4", "--no_python",
                     "/bin/sh", "-c", gate.wait_command() + "; exit 3"},
                    dir / "out");
      REQUIRE(gate.wait_until_all_wait({0, 1, 2, 3}, 30s));
      gate.open();
      REQUIRE(agent.wait_exit(60s) == 1);
      const std::string out = agent.output();
      INFO("run " << run << ":\n" << out);
      CHECK(listed_failures(out) == std::map<int, int>{{0, 3}, {1, 3}, {2, 3}, {3, 3}});
      CHECK(out.find("<NO_OTHER_FAILURES>") == std::string::npos);
      for (int rank = 0; rank < 4; ++rank) {
        const std::string line = "ddprun: worker rank " + std::to_string(rank) + " (local_rank " +
                                 std::to_string(rank) + ", pid ";
        CHECK(count_occurrences(out, line) == 1);
      }
    }
  }
  SECTION("two exit 3, one exits 5 a little later, one is stopped: three listed") {
    TempDir dir;
    WorkerGate gate(dir);
    // Rank 2 computes a few milliseconds (a shell loop) before its exit 5, as a rank finishing
    // its step before it meets the failure does; rank 3 sleeps until the stop ends it.
    const std::string script = "case $LOCAL_RANK in\n  0|1) " + gate.wait_command() +
                               "; exit 3;;\n  2) " + gate.wait_command() + "; " + kBusyLoop +
                               "; exit 5;;\n  *) exec sleep 60;;\nesac\n";
    Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "4", "--no_python",
                   "/bin/sh", "-c", script},
                  dir / "out");
    REQUIRE(gate.wait_until_all_wait({0, 1, 2}, 30s));
    gate.open();
    REQUIRE(agent.wait_exit(60s) == 1);
    const std::string out = agent.output();
    INFO(out);
    CHECK(listed_failures(out) == std::map<int, int>{{0, 3}, {1, 3}, {2, 5}});
    CHECK(out.find("ddprun: worker rank 2 (local_rank 2, pid ") != std::string::npos);
    CHECK(out.find("failed: exit code 5") != std::string::npos);
    CHECK(out.find("ddprun: worker rank 3 (") == std::string::npos);  // stopped by the agent
  }
  SECTION("2 nodes x 2 ranks exit 3 within moments: each node lists its own") {
    TempDir dir;
    WorkerGate gate(dir);
    const uint16_t port = free_port("127.0.0.2");
    // On each node local rank 1 computes a few milliseconds longer than local rank 0.
    const std::string worker =
        gate.wait_command() + "; [ $LOCAL_RANK = 0 ] || " + kBusyLoop + "; exit 3";
    std::vector<std::unique_ptr<Process>> agents;
    for (int node : {1, 2}) {
      std::vector<std::string> argv = two_node_c10d_agent(port, node, "together", 2);
      for (const char* arg : {"--no_python", "/bin/sh", "-c"})
        argv.push_back(arg);
      argv.push_back(worker);
      agents.push_back(std::make_unique<Process>(argv, dir / ("node" + std::to_string(node))));
    }
    REQUIRE(gate.wait_until_all_wait({0, 1, 2, 3}, 60s));
    gate.open();
    std::vector<std::string> outs;
    for (auto& agent : agents) {
      REQUIRE(agent->wait_exit(60s) == 1);
      outs.push_back(agent->output());
    }
    INFO("node 1:\n" << outs[0] << "\nnode 2:\n" << outs[1]);
    // Each node lists its own two ranks (which ranks a node gets is the rendezvous' choice), on
    // the console too; what it heard of the other node's is listed as well.
    std::map<int, int> job;
    for (std::size_t node = 0; node < outs.size(); ++node) {
      const std::string host = "127.0.0." + std::to_string(node + 1);
      const std::map<int, int> own = listed_failures(outs[node], host);
      CHECK(own.size() == 2);
      for (const auto& [rank, code] : own) {
        CHECK(code == 3);
        CHECK(outs[node].find("ddprun: worker rank " + std::to_string(rank) + " (") !=
              std::string::npos);
        job[rank] = code;
      }
    }
    CHECK(job == std::map<int, int>{{0, 3}, {1, 3}, {2, 3}, {3, 3}});
    // Which node's failure is the root cause depends on which reported first here: both did
    // at one instant. Each names one (round_policy_test checks the order).
    for (const auto& out : outs)
      CHECK(out.find("Root Cause (first observed failure):\n[") != std::string::npos);
  }
}

TEST_CASE("torchrun parity: what a user migrating from torchrun meets first") {
  SECTION("a loopback endpoint that no --local_addr names: one agent binds, the other joins") {
    Job job;
    job.script = "true";
    const uint16_t port = free_port("127.0.0.1");
    run_two_agents_at(job, "127.0.0.1:" + std::to_string(port),
                      kFastRdzv);  // the heuristic decides
  }
  SECTION("SIGTERM while the store is still unreachable ends the agent at once") {
    Job job;
    job.rdzv_conf = "join_timeout=300";
    job.script = "true";
    Process agent(job.agent_argv(3), job.dir / "agent");
    const auto deadline = Clock::now() + 10s;
    while (!blocks_sigterm(agent.pid()) && Clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);  // nothing to wait on: the agent says nothing yet
    }
    agent.signal(SIGTERM);
    // Bounded far below join_timeout: torchrun (and ddprun before) sat out all of it.
    CHECK(agent.wait_exit(10s) == 128 + SIGTERM);
    CHECK(agent.output().find("received SIGTERM during rendezvous") != std::string::npos);
  }
  SECTION("a rendezvous whose store is PyTorch 1.13's TCPStore (the old wire generation)") {
    using ddprun::rendezvous::store::testing::ChildProcess;
    ChildProcess python({"/usr/bin/python3", std::string(DDPRUN_SOURCE_DIR) +
                                                 "/tests/rendezvous/python/tcpstore_server.py"});
    auto line = python.read_line(60s);
    REQUIRE(line);
    const std::string port = line->substr(line->find(' ') + 1);
    REQUIRE(python.read_line(10s) == std::optional<std::string>("ready"));
    Job job;
    job.script = "true";
    run_two_agents_at(job, "127.0.0.1:" + port, kFastRdzv + ",is_host=0");
  }
  SECTION("--standalone gives workers MASTER_ADDR=localhost, as torchrun") {
    TempDir dir;
    Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "1", "--no_python",
                   "/bin/sh", "-c", "echo \"addr=$MASTER_ADDR\""},
                  dir / "out");
    CHECK(agent.wait_exit(30s) == 0);
    CHECK(agent.output().find("addr=localhost\n") != std::string::npos);
  }
}
