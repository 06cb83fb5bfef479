// `ddprun stacks`: every node of a running job captures its workers' stacks on demand and says
// where; the job goes on. The answer record the nodes store is validated when read back.

#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "agent/stacks/stacks_answer.hpp"
#include "tests/agent/e2e_support.hpp"

namespace {

using namespace std::chrono_literals;
using ddprun::agent::StacksAnswer;
using namespace ddprun::agent::e2e;

// Waits in a named function until the go file exists, so the stacks have a frame to find. Its
// lines go out in one write each: the ranks share the agent's stdout, and an unbuffered print()
// writes its pieces apart.
constexpr const char* kWorker =
    "import os, sys, time\n"
    "def wait_for_go(go):\n"
    "    while not os.path.exists(go):\n"
    "        time.sleep(0.05)\n"
    "os.write(1, ('rank %s started\\n' % os.environ['RANK']).encode())\n"
    "wait_for_go(sys.argv[1])\n"
    "os.write(1, ('rank %s done\\n' % os.environ['RANK']).encode())\n";

std::vector<std::string> rendezvous_args(uint16_t port, const std::string& run_id) {
  return {"--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:" + std::to_string(port),
          "--rdzv-id",      run_id};
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("a stacks answer survives the round trip and names what is corrupt", "[stacks][unit]") {
  StacksAnswer answer;
  answer.host = "node-a";
  answer.group_rank = 1;
  answer.nodes = 2;
  answer.stacks_dir = "/logs/job/attempt_0/stacks";
  answer.ranks = {2, 3};
  const StacksAnswer back =
      ddprun::agent::stacks_answer_from_json(ddprun::agent::stacks_answer_to_json(answer));
  CHECK(back.host == answer.host);
  CHECK(back.group_rank == 1);
  CHECK(back.nodes == 2);
  CHECK(back.stacks_dir == answer.stacks_dir);
  CHECK(back.ranks == answer.ranks);
  CHECK(ddprun::agent::describe_stacks_answer(back) ==
        "node 1 (node-a): ranks 2-3: /logs/job/attempt_0/stacks");

  const auto corrupt = [](const std::string& text) {
    try {
      ddprun::agent::stacks_answer_from_json(text);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  CHECK(corrupt("") == "the record is not a JSON object");
  CHECK(corrupt("[1]") == "the record is not a JSON object");
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":2,"ranks":[]})") ==
        "'group_rank' is missing");
  CHECK(corrupt(R"({"host":1,"stacks_dir":"","nodes":2,"group_rank":0,"ranks":[]})") ==
        "'host' is not a string");
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":2,"group_rank":2,"ranks":[]})") ==
        "'group_rank' is 2, not in [0, 1]");
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":0,"group_rank":0,"ranks":[]})") ==
        "'nodes' is 0, not in [1, 1048576]");
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":1,"group_rank":0,"ranks":[-1]})") ==
        "'ranks' is -1, not in [0, 1073741823]");
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":1,"group_rank":0,"ranks":"x"})")
            .starts_with("'ranks' is not an array"));
  CHECK(corrupt(R"({"host":")" + std::string(5000, 'h') +
                R"(","stacks_dir":"","nodes":1,"group_rank":0,"ranks":[]})") ==
        "'host' is longer than 4096 bytes");
  CHECK(corrupt(std::string(ddprun::agent::kMaxStacksAnswerBytes + 1, ' '))
            .starts_with("the record is longer than"));
  // The stacks' text rides along for the job page, bounded.
  answer.stacks = {{2, "wait_for_go (worker.py:5)"}, {3, std::string("\xff\xfe", 2)}};
  const StacksAnswer with_text =
      ddprun::agent::stacks_answer_from_json(ddprun::agent::stacks_answer_to_json(answer));
  CHECK(with_text.stacks.at(2) == "wait_for_go (worker.py:5)");
  CHECK(with_text.stacks.contains(3));  // invalid UTF-8 replaced, never an exception
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":1,"group_rank":0,"ranks":[],)"
                R"("stacks":{"x":"y"}})")
            .starts_with("'a rank of 'stacks'' is not an integer"));
  CHECK(corrupt(R"({"host":"a","stacks_dir":"","nodes":1,"group_rank":0,"ranks":[],)"
                R"("stacks":{"1":")" +
                std::string(ddprun::agent::kMaxStackText + 1, 's') + R"("}})")
            .starts_with("the stack of rank 1 is not a string of at most"));
}

TEST_CASE("ddprun stacks: every node of a running job says where its ranks' stacks are",
          "[stacks][e2e]") {
  TempDir dir;
  write_file(dir / "worker.py", kWorker);
  const std::string go = dir / "go";
  const uint16_t port = free_port();
  const std::string run_id = "stacks_job";
  const std::map<std::string, std::string> env = {{"PYTHON_EXEC", reference_python()}};
  std::vector<std::unique_ptr<Process>> agents;
  for (int node = 0; node < 2; ++node) {
    const std::vector<std::string> argv =
        concat(concat({ddprun_binary(), "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-conf",
                       kFastRdzv, "--log-dir", dir / ("logs" + std::to_string(node))},
                      rendezvous_args(port, run_id)),
               {dir / "worker.py", go});
    agents.push_back(
        std::make_unique<Process>(argv, dir / ("agent" + std::to_string(node) + ".out"), env));
  }
  // Every rank waits in wait_for_go.
  for (int node = 0; node < 2; ++node) {
    REQUIRE(wait_for_file(
        dir / ("agent" + std::to_string(node) + ".out"),
        [](const std::string& text) {
          return std::regex_search(text, std::regex("started[^]*started"));
        },
        60s));
  }

  Process stacks(concat({ddprun_binary(), "stacks"}, rendezvous_args(port, run_id)),
                 dir / "stacks.out");
  REQUIRE(stacks.wait_exit(60s) == 0);
  const std::string answer = stacks.output();
  INFO(answer);
  CHECK(answer.find("stacks of round ") != std::string::npos);
  // Each node names its ranks and its folder; every rank's file has the Python frame.
  std::set<int> ranks_seen;
  const std::regex line(R"(node (\d) \([^)]*\): ranks (\d)-(\d): (\S+))");
  for (auto it = std::sregex_iterator(answer.begin(), answer.end(), line);
       it != std::sregex_iterator(); ++it) {
    const std::string folder = (*it)[4];
    for (int rank = std::stoi((*it)[2]); rank <= std::stoi((*it)[3]); ++rank) {
      ranks_seen.insert(rank);
      const std::string stack = read_file(folder + "/rank" + std::to_string(rank) + ".txt");
      INFO(stack);
      CHECK(stack.find("wait_for_go (worker.py:") != std::string::npos);
    }
  }
  CHECK(ranks_seen == std::set<int>{0, 1, 2, 3});

  // Nobody was signalled: the job finishes as if nothing happened, each rank once.
  write_file(go, "");
  for (int node = 0; node < 2; ++node) {
    CHECK(agents[static_cast<std::size_t>(node)]->wait_exit(60s) == 0);
    const std::string out = agents[static_cast<std::size_t>(node)]->output();
    INFO(out);
    CHECK(out.find("ddprun: stacks asked for (ddprun stacks, request 1): ") != std::string::npos);
    CHECK(out.find("restart") == std::string::npos);
  }
  const std::string all = agents[0]->output() + agents[1]->output();
  for (int rank = 0; rank < 4; ++rank)
    CHECK(all.find("rank " + std::to_string(rank) + " done") != std::string::npos);
}

TEST_CASE("ddprun stacks names what it cannot ask", "[stacks][e2e]") {
  TempDir dir;
  SECTION("no job under that id: exit 1, the rendezvous named") {
    // A store with no rounds: a one-node job of another id is running on it.
    write_file(dir / "worker.py", kWorker);
    const uint16_t port = free_port();
    Process job(concat(concat({ddprun_binary(), "--nnodes", "1", "--rdzv-conf", kFastRdzv},
                              rendezvous_args(port, "other")),
                       {dir / "worker.py", dir / "go"}),
                dir / "job.out", {{"PYTHON_EXEC", reference_python()}});
    REQUIRE(wait_for_file(
        dir / "job.out", [](const std::string& t) { return t.find("started") != t.npos; }, 60s));
    Process stacks(concat({ddprun_binary(), "stacks"}, rendezvous_args(port, "nosuch")),
                   dir / "stacks.out");
    REQUIRE(stacks.wait_exit(60s) == 1);
    CHECK(stacks.output().find("no round of rendezvous 'nosuch' at 127.0.0.1:" +
                               std::to_string(port) + " has formed") != std::string::npos);
    write_file(dir / "go", "");
    CHECK(job.wait_exit(60s) == 0);
  }
  SECTION("an entry point after the options: exit 2") {
    Process stacks({ddprun_binary(), "stacks", "--rdzv-backend", "c10d", "train.py"},
                   dir / "stacks.out");
    REQUIRE(stacks.wait_exit(30s) == 2);
    CHECK(stacks.output().find("ddprun stacks takes no entry point") != std::string::npos);
  }
  SECTION("--standalone: exit 1, its rendezvous is private") {
    Process stacks({ddprun_binary(), "stacks", "--standalone"}, dir / "stacks.out");
    REQUIRE(stacks.wait_exit(30s) == 1);
    CHECK(stacks.output().find("private to its agent") != std::string::npos);
  }
  SECTION("--help describes the subcommand") {
    Process stacks({ddprun_binary(), "stacks", "--help"}, dir / "stacks.out");
    REQUIRE(stacks.wait_exit(30s) == 0);
    CHECK(stacks.output().find("usage: ddprun stacks") != std::string::npos);
  }
}
