// ddprun side by side with torchrun 2.13 (the project's .venv, made by scripts/install-deps.sh):
// what reaches a terminal and what workers see of it in every output mode, the failure table
// when several ranks fail, the worker environment of --virtual-local-rank and the torchrun
// variables, --duplicate-stdout-filters' file, quoted list values and --logs-specs. Workers are
// small shell scripts, so both launchers run the very same thing.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <regex>

#include "e2e_support.hpp"
#include "terminal_run.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;

namespace {

using Env = std::map<std::string, std::string>;

// torchrun 2.13 from the project's virtual environment: the tests' reference Python
// (DDPRUN_TORCH_PYTHON) where the build defines it, else .venv.
std::vector<std::string> torchrun() {
#ifdef DDPRUN_TORCH_PYTHON
  const std::string python = DDPRUN_TORCH_PYTHON;
#else
  const std::string python = std::string(DDPRUN_SOURCE_DIR) + "/.venv/bin/python";
#endif
  INFO("torchrun 2.13 comes from " << python << " (scripts/install-deps.sh makes it)");
  REQUIRE(::access(python.c_str(), X_OK) == 0);
  return {python, "-m", "torch.distributed.run"};
}

std::vector<std::string> ddprun_launcher() {
  return {ddprun_binary()};
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The lines of `text` that contain `marker`, "\r\n" read as "\n", sorted.
std::vector<std::string> lines_with(const std::string& text, const std::string& marker) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find(marker) != std::string::npos)
      lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// The failure table, from its first border to its last, with the values that differ between
// two runs (times, pids, host names) masked.
std::string masked_table(const std::string& output) {
  std::string text = std::regex_replace(output, std::regex("\r\n"), "\n");
  const auto start = text.find("\n====");
  REQUIRE(start != std::string::npos);
  const auto last = text.find("\n====", start + 1);
  REQUIRE(last != std::string::npos);
  std::string table = text.substr(start + 1, text.find('\n', last + 1) - start);
  table = std::regex_replace(table, std::regex("time      : [0-9_:-]+"), "time      : T");
  table = std::regex_replace(table, std::regex("\\(pid: [0-9]+\\)"), "(pid: P)");
  table = std::regex_replace(table, std::regex("host      : [^\n]+"), "host      : H");
  return table;
}

struct MarkedRun {
  int status = -1;
  bool worker_ran = false;
  std::string output;
};

// `launcher --standalone OPTIONS` with one worker that creates <dir>/<tag>.ran: the exit
// status, and whether the worker started at all.
MarkedRun run_marking_worker(const std::vector<std::string>& launcher,
                             const std::vector<std::string>& options, const TempDir& dir,
                             const std::string& tag, const Env& env = {}) {
  const std::string marker = dir / (tag + ".ran");
  Process agent(concat(concat(concat(launcher, {"--standalone"}), options),
                       {"--no-python", "/usr/bin/touch", marker}),
                dir / (tag + ".out"), env);
  const auto status = agent.wait_exit(60s);
  return {status.value_or(-1), fs::exists(marker), agent.output()};
}

// Both launchers, torchrun 2.13 first, start the job with `options` and `env`: exit 0, and the
// worker ran.
void check_both_run_the_worker(const std::vector<std::string>& options, const Env& env,
                               const TempDir& dir, const std::string& tag) {
  for (const auto& [launcher, name] :
       {std::pair{torchrun(), tag + "-torchrun"}, std::pair{ddprun_launcher(), tag + "-ddprun"}}) {
    const MarkedRun run = run_marking_worker(launcher, options, dir, name, env);
    INFO(name << ": " << run.output);
    CHECK(run.status == 0);
    CHECK(run.worker_ran);
  }
}

}  // namespace

TEST_CASE("what a terminal shows and what workers see of it, mode by mode, as torchrun 2.13") {
  const std::vector<std::string> worker = {
      "--no-python", "/bin/sh", "-c",
      "[ -t 1 ] && o=tty || o=no; [ -t 2 ] && e=tty || e=no; "
      "echo \"worker:rank$LOCAL_RANK out=$o err=$e\"; echo \"worker:err$LOCAL_RANK\" >&2"};
  TempDir dir;
  const std::vector<std::vector<std::string>> modes = {
      {},
      {"--tee", "3"},
      {"--local-ranks-filter", "1"},
      {"--tee", "1", "--local-ranks-filter", "1"},
      {"--redirects", "1", "--local-ranks-filter", "1"},
      {"--redirects", "0:3", "--tee", "1:2"},
  };
  for (const auto& mode : modes) {
    std::string shown;
    for (const auto& word : mode)
      shown += word + " ";
    INFO("options: " << shown);
    auto run = [&](const std::vector<std::string>& launcher, const std::string& logs) {
      const auto argv = concat(
          concat(concat(launcher, {"--standalone", "--nproc-per-node", "2", "--log-dir", logs}),
                 mode),
          worker);
      TerminalRun result = run_in_terminal(argv, {{"OMP_NUM_THREADS", "1"}});
      INFO(result.output);
      CHECK(result.status == 0);
      return lines_with(result.output, "worker:");
    };
    const auto reference = run(torchrun(), dir / "ref");
    const auto ours = run(ddprun_launcher(), dir / "ours");
    CHECK(ours == reference);
  }
  SECTION("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE changes the --tee prefix, nothing else") {
    const Env env{{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<${rank}|${role_name}>"},
                  {"OMP_NUM_THREADS", "1"}};
    auto run = [&](const std::vector<std::string>& launcher) {
      const auto argv = concat(concat(launcher, {"--standalone", "--nproc-per-node", "2", "--tee",
                                                 "1", "--log-dir", dir / "template"}),
                               worker);
      TerminalRun result = run_in_terminal(argv, env);
      INFO(result.output);
      CHECK(result.status == 0);
      return lines_with(result.output, "worker:");
    };
    const auto reference = run(torchrun());
    CHECK(run(ddprun_launcher()) == reference);
    CHECK(std::find(reference.begin(), reference.end(), "<0|default>worker:rank0 out=no err=tty") !=
          reference.end());
  }
}

TEST_CASE("several ranks fail at once: torchrun 2.13's table, entry point as given") {
  TempDir dir;
  const std::string fifo = dir / "handoff";
  // Local ranks 1 and 2 fail within moments of each other (a FIFO hand-off); rank 0 runs on
  // until it is stopped. --monitor-interval 3: both failures fall in one of torchrun's checks
  // (ddprun ignores it: it stops the group at once and lists rank 2, whose exit is its own).
  const std::string as_given = write_two_failing_ranks_script(dir, fifo);
  auto run = [&](const std::vector<std::string>& launcher, const std::string& tag) {
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    Process agent(concat(launcher, {"--standalone", "--nproc-per-node", "3", "--monitor-interval",
                                    "3", "--no-python", as_given}),
                  dir / tag, {{"OMP_NUM_THREADS", "1"}});
    const auto status = agent.wait_exit(60s);
    ::unlink(fifo.c_str());
    INFO(agent.output());
    CHECK(status == 1);
    return masked_table(agent.output());
  };
  const std::string reference = run(torchrun(), "ref");
  const std::string ours = run(ddprun_launcher(), "ours");
  // torchrun 2.13 also lists the workers it stopped itself (rank 0 here, "-15 (SIGTERM)");
  // ddprun lists only the workers that failed, on purpose (README): the same table without
  // those entries.
  const std::regex stopped_entry(
      "\\[[0-9]+\\]:\n(  [^\n]*\n){3}  exitcode  : -15 \\(pid: P\\)  \\(SIGTERM\\)\n"
      "(  [^\n]*\n){2}");
  CHECK(std::regex_search(reference, stopped_entry));
  CHECK(ours == std::regex_replace(reference, stopped_entry, ""));
  CHECK(reference.find(as_given + " FAILED") != std::string::npos);
}

TEST_CASE("worker environment: --virtual-local-rank and torchrun's variables, as torchrun 2.13") {
  TempDir dir;
  // The file-timer watchdog's own contract is tested with its server
  // (agent/watchdog/file_timer_setup); a given TORCHELASTIC_TIMER_FILE reaches the workers either
  // way.
  const Env env{{"CUDA_VISIBLE_DEVICES", "3,5"},
                {"TORCHELASTIC_TIMER_FILE", dir / "timer"},
                {"USE_LIBUV", "0"},
                {"OMP_NUM_THREADS", "1"},
                {"OUT", dir.path()}};
  const std::vector<std::string> worker = {
      "--no-python", "/bin/sh", "-c",
      "echo \"$LOCAL_RANK $CUDA_VISIBLE_DEVICES $USE_LIBUV $TORCHELASTIC_TIMER_FILE\" > "
      "\"$OUT/$TAG-$RANK\""};
  auto run = [&](const std::vector<std::string>& launcher, const std::string& tag) {
    Env tagged = env;
    tagged["TAG"] = tag;
    Process agent(
        concat(concat(launcher, {"--standalone", "--nproc-per-node", "2", "--virtual-local-rank"}),
               worker),
        dir / (tag + ".out"), tagged);
    const auto status = agent.wait_exit(60s);
    INFO(agent.output());
    REQUIRE(status == 0);
    std::vector<std::string> seen;
    for (const char* rank : {"0", "1"})
      seen.push_back(read_file(dir / (tag + "-" + rank)));
    return seen;
  };
  const auto reference = run(torchrun(), "ref");
  CHECK(run(ddprun_launcher(), "ours") == reference);
  CHECK(reference[1] == "0 5 0 " + (dir / "timer") + "\n");
}

TEST_CASE("--duplicate-stdout-filters writes the file torchrun 2.13 writes") {
  TempDir dir;
  const std::vector<std::string> worker = {
      "--no-python", "/bin/sh", "-c",
      "echo \"step 1 loss=$RANK\"; echo noise; echo \"acc, loss=$RANK\"; echo 'lr=1' >&2"};
  auto run = [&](const std::vector<std::string>& launcher, const std::string& tag) {
    const std::string logs = dir / tag;
    Process agent(concat(concat(launcher, {"--standalone", "--nproc-per-node", "2", "--tee", "3",
                                           "--log-dir", logs, "--duplicate-stdout-filters",
                                           "acc,, loss,step", "--duplicate-stderr-filters", "lr"}),
                         worker),
                  dir / (tag + ".out"), {{"OMP_NUM_THREADS", "1"}});
    REQUIRE(agent.wait_exit(60s) == 0);
    std::string attempt;
    for (const auto& run_dir : fs::directory_iterator(logs))
      attempt = run_dir.path() / "attempt_0";
    return std::pair{lines_with(read_file(attempt + "/filtered_stdout.log"), ""),
                     lines_with(read_file(attempt + "/filtered_stderr.log"), "")};
  };
  const auto reference = run(torchrun(), "ref");
  CHECK(run(ddprun_launcher(), "ours") == reference);
  CHECK(reference.first ==
        std::vector<std::string>{"[default0]:acc, loss=0", "[default0]:step 1 loss=0",
                                 "[default1]:acc, loss=1", "[default1]:step 1 loss=1"});
  CHECK(reference.second == std::vector<std::string>{"[default0]:lr=1", "[default1]:lr=1"});
}

TEST_CASE("quoted list values that torchrun 2.13 starts a job with, ddprun starts it with too") {
  // As Python's subprocess.run or a YAML template hands them over: no shell removed the quotes.
  // torchrun 2.13 does not strip them; it starts because c10d ignores the keys they mangle
  // ("'join_timeout", timeout="5'") and it skips signal names it cannot find. ddprun reads the
  // values without the quotes (join_timeout 5, both signals handled).
  const std::string conf = "'join_timeout=5,last_call_timeout=1,timeout=5'";
  TempDir dir;
  SECTION("--rdzv-conf") {
    check_both_run_the_worker({"--rdzv-conf=" + conf}, {}, dir, "conf");
  }
  SECTION("PET_RDZV_CONF") {
    check_both_run_the_worker({}, {{"PET_RDZV_CONF", conf}}, dir, "pet-conf");
  }
  SECTION("--signals-to-handle") {
    check_both_run_the_worker({"--signals-to-handle", "'SIGTERM,SIGUSR1'"}, {}, dir, "signals");
  }
}

TEST_CASE("logs specs as torchrun 2.13: default runs, other names stop before a worker") {
  TempDir dir;
  SECTION("an unknown name: refused before a worker starts") {
    const std::vector<std::string> options{"--logs_specs=DOESNOT_EXIST"};
    const MarkedRun reference = run_marking_worker(torchrun(), options, dir, "torchrun");
    INFO("torchrun: " << reference.output);
    CHECK(reference.status != 0);
    CHECK_FALSE(reference.worker_ran);
    CHECK_THAT(reference.output, Catch::Contains("torchrun.logs_specs[DOESNOT_EXIST]"));
    const MarkedRun ours = run_marking_worker(ddprun_launcher(), options, dir, "ddprun");
    INFO("ddprun: " << ours.output);
    CHECK(ours.status == 2);  // a bad option value, as every other one
    CHECK_FALSE(ours.worker_ran);
    CHECK_THAT(ours.output, Catch::StartsWith("ddprun: error: --logs_specs: 'DOESNOT_EXIST'") &&
                                Catch::Contains("cannot load") && Catch::Contains("--log-dir"));
  }
  SECTION("default: the one name torch 2.13 ships") {
    check_both_run_the_worker({"--logs-specs", "default"}, {}, dir, "default");
  }
  SECTION("PET_LOGS_SPECS: torchrun does not read it (ddprun warns that it does not either)") {
    check_both_run_the_worker({}, {{"PET_LOGS_SPECS", "DOESNOT_EXIST"}}, dir, "pet");
  }
}
