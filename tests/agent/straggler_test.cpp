// Stragglers: each rank's step interval from its heartbeats, compared job-wide; a slow rank is
// reported with its host, never signalled.

#include <catch2/catch.hpp>
#include <regex>

#include "agent/watchdog/progress/step_times.hpp"
#include "agent/watchdog/progress/straggler_report.hpp"
#include "tests/agent/e2e_support.hpp"
#include "tests/agent/events_file.hpp"

namespace {

using namespace std::chrono_literals;
using namespace ddprun::agent;
using namespace ddprun::agent::e2e;

}  // namespace

TEST_CASE("step times: the median interval between beats over the window", "[straggler][unit]") {
  StepTimes steps(10s);
  steps.start_group({WatchedWorker{0, 4, 100}, WatchedWorker{1, 5, 101}});
  const auto t0 = StepTimes::Clock::time_point{} + 1000s;
  // Rank 4 beats every 100 ms, with one 3 s outlier; rank 5 beats twice only.
  steps.on_beats(0, 1, t0);
  for (int i = 1; i <= 5; ++i)
    steps.on_beats(0, 1, t0 + i * 100ms);
  steps.on_beats(0, 1, t0 + 3500ms);
  steps.on_beats(1, 1, t0);
  steps.on_beats(1, 1, t0 + 1s);
  auto medians = steps.medians(t0 + 3500ms);
  REQUIRE(medians.size() == 1);  // rank 5 has one interval: too few
  CHECK(medians.at(4) == Approx(0.1));
  // Beats drained together count as that many steps.
  steps.on_beats(1, 4, t0 + 3s);
  medians = steps.medians(t0 + 3s);
  CHECK(medians.at(5) == Approx(0.5));
  // The window forgets: 20 s later nothing is left.
  CHECK(steps.medians(t0 + 30s).empty());
  steps.forget_worker(0);
  steps.on_beats(0, 1, t0 + 31s);  // unknown now: ignored
  CHECK(steps.medians(t0 + 31s).empty());
}

TEST_CASE("step times as a series: the window in equal spans, each span's median",
          "[straggler][unit]") {
  StepTimes steps(10s);
  steps.start_group({WatchedWorker{0, 4, 100}});
  const auto t0 = StepTimes::Clock::time_point{} + 1000s;
  // Every 100 ms for the first 2 s of the window, then every 500 ms up to 5.5 s, then nothing.
  steps.on_beats(0, 1, t0);
  for (int i = 1; i <= 20; ++i)
    steps.on_beats(0, 1, t0 + i * 100ms);
  for (int i = 1; i <= 7; ++i)
    steps.on_beats(0, 1, t0 + 2s + i * 500ms);
  const auto series = steps.series(t0 + 10s, 5);  // spans of 2 s from t0
  REQUIRE(series.size() == 1);
  const auto& points = series.at(4);
  REQUIRE(points.size() == 5);
  REQUIRE(points[0]);
  CHECK(*points[0] == Approx(0.1));
  REQUIRE(points[1]);
  CHECK(*points[1] == Approx(0.5));
  REQUIRE(points[2]);
  CHECK(*points[2] == Approx(0.5));
  CHECK_FALSE(points[3]);  // no step ended there
  CHECK_FALSE(points[4]);
  CHECK(steps.series(t0 + 10s, 0).empty());
}

TEST_CASE("stragglers: slower than the job's median by the factor", "[straggler][unit]") {
  const std::vector<NodeStepTimes> nodes = {{"a", {{0, 0.10}, {1, 0.11}}},
                                            {"b", {{2, 0.10}, {3, 0.45}}}};
  const auto slow = find_stragglers(nodes, 2.0);
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].rank == 3);
  CHECK(slow[0].host == "b");
  CHECK(slow[0].job_median_s == Approx(0.10));
  CHECK(describe_straggler(slow[0], 60s) ==
        "straggler: rank 3 on b steps every 0.450 s, 4.5x the job's median 0.100 s (last "
        "60.000 s)");
  CHECK(find_stragglers(nodes, 5.0).empty());
  CHECK(find_stragglers(nodes, 0).empty());
  // One slow rank of two is measured against the other (the lower middle).
  CHECK(find_stragglers({{"a", {{0, 0.1}}}, {"b", {{1, 0.3}}}}, 2.0).size() == 1);
  CHECK(find_stragglers({{"a", {{0, 0.1}}}}, 2.0).empty());  // alone: nothing to compare

  // Records round-trip, and a corrupt one is named, never trusted.
  const NodeStepTimes back = node_step_times_from_json(node_step_times_to_json(nodes[1]));
  CHECK(back.host == "b");
  CHECK(back.median_step_s == nodes[1].median_step_s);
  const auto corrupt = [](const std::string& text) {
    try {
      node_step_times_from_json(text);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  CHECK(corrupt("1e308") == "the record is not a JSON object");
  CHECK(corrupt(R"({"median_step_s":{}})").starts_with("'host' is not a string"));
  CHECK(corrupt(R"({"host":"a","median_step_s":[]})").starts_with("'median_step_s' is not an"));
  CHECK(corrupt(R"({"host":"a","median_step_s":{"x":1}})") ==
        "'median_step_s' has a key that is not a rank: 'x'");
  CHECK(corrupt(R"({"host":"a","median_step_s":{"1":-1}})") ==
        "'median_step_s' of rank 1 is not a number of seconds in (0, 1e7)");
  CHECK(corrupt(R"({"host":"a","median_step_s":{"1":"0.1"}})") ==
        "'median_step_s' of rank 1 is not a number of seconds in (0, 1e7)");
  CHECK(corrupt(std::string(300 * 1024, ' ')).starts_with("the record is longer than"));
}

TEST_CASE("a deliberately slow rank is reported with its host, and not killed",
          "[straggler][e2e]") {
  TempDir dir;
  // Every rank beats once per "step"; rank 3 steps six times slower. All stop at the go file.
  // Lines go out in one write each: the ranks share the agent's stdout, and an unbuffered
  // print() writes its pieces apart, so two ranks' words could interleave.
  write_file(dir / "worker.py",
             "import os, sys, time\n"
             "fd = int(os.environ['DDPRUN_HEARTBEAT_FD'])\n"
             "step = 0.3 if os.environ['RANK'] == '3' else 0.05\n"
             "while not os.path.exists(sys.argv[1]):\n"
             "    os.write(fd, b'.')\n"
             "    time.sleep(step)\n"
             "os.write(1, ('rank %s done\\n' % os.environ['RANK']).encode())\n");
  const std::string go = dir / "go";
  const uint16_t port = free_port();
  std::vector<std::unique_ptr<Process>> agents;
  for (int node = 0; node < 2; ++node) {
    const std::string n = std::to_string(node);
    agents.push_back(std::make_unique<Process>(
        std::vector<std::string>{ddprun_binary(),
                                 "--nnodes",
                                 "2",
                                 "--nproc-per-node",
                                 "2",
                                 "--rdzv-backend",
                                 "c10d",
                                 "--rdzv-endpoint",
                                 "127.0.0.1:" + std::to_string(port),
                                 "--rdzv-id",
                                 "slow",
                                 "--rdzv-conf",
                                 kFastRdzv,
                                 "--watchdog-timeout",
                                 "60",
                                 "--straggler-factor",
                                 "2",
                                 "--straggler-window",
                                 "2",
                                 "--events-file",
                                 dir / ("events" + n + ".jsonl"),
                                 dir / "worker.py",
                                 go},
        dir / ("agent" + n + ".out"),
        std::map<std::string, std::string>{{"PYTHON_EXEC", reference_python()}}));
  }
  // Node 0 compares; the slow rank is named within a few windows.
  const bool reported = wait_for_file(
      dir / "agent0.out",
      [](const std::string& text) { return text.find("straggler: rank") != text.npos; }, 90s);
  write_file(go, "");
  for (auto& agent : agents)
    CHECK(agent->wait_exit(60s) == 0);  // nobody was killed: every worker finished
  const std::string out0 = agents[0]->output();
  INFO(out0);
  REQUIRE(reported);
  CHECK(std::regex_search(
      out0, std::regex(R"(ddprun: straggler: rank 3 on \S+ steps every 0\.[2-9]\d* s)")));
  CHECK(!std::regex_search(out0, std::regex(R"(straggler: rank [012] )")));
  const auto events = read_events(dir / "events0.jsonl");
  const auto straggler = std::find_if(events.begin(), events.end(),
                                      [](const auto& e) { return e.at("event") == "straggler"; });
  REQUIRE(straggler != events.end());
  CHECK(straggler->at("rank") == 3);
  CHECK(straggler->at("factor") == 2.0);
  const std::string all = out0 + agents[1]->output();
  for (int rank = 0; rank < 4; ++rank)
    CHECK(all.find("rank " + std::to_string(rank) + " done") != std::string::npos);
}
