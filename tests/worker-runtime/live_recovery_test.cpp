// Live recovery (--recovery live) end to end: real agents on loopback addresses 127.0.0.1-4 (c10d,
// node 1 hosts the store), each with one ddprun-train worker. One node is SIGKILLed mid-epoch
// (agent and worker, frozen first so that neither reacts), the survivors go on in a world of two,
// then a replacement joins and takes the state from a survivor.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../agent/e2e_support.hpp"
#include "../agent/events_file.hpp"

namespace {

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;

const std::string kTrainer = std::string(DDPRUN_BIN_DIR) + "/ddprun-train";

// A 3-node job of a small model, long enough epochs that the loss lands mid-epoch.
struct LiveJob {
  TempDir dir;
  uint16_t port = free_port();
  std::string rdzv_conf = kFastRdzv;
  std::string nnodes = "2:3";

  std::string events(int node) const { return dir / ("events." + std::to_string(node)); }
  std::string output(int node) const { return dir / ("out." + std::to_string(node)); }

  std::string metrics(int node) const { return dir / ("metrics." + std::to_string(node)); }

  std::vector<std::string> command(int node) const {
    auto argv = launcher(node);
    const auto train = train_args(dir / "snapshot.pt", metrics(node));
    argv.insert(argv.end(), train.begin(), train.end());
    return argv;
  }

  std::vector<std::string> launcher(int node) const {
    return {ddprun_binary(),
            "--nnodes",
            nnodes,
            "--nproc_per_node",
            "1",
            "--rdzv_backend",
            "c10d",
            "--rdzv_endpoint",
            "127.0.0.1:" + std::to_string(port),
            "--rdzv_id",
            "live",
            "--rdzv_conf",
            rdzv_conf + (node == 1 ? ",is_host=1" : ",is_host=0"),
            "--local_addr",
            "127.0.0." + std::to_string(node),
            "--max_restarts",
            "3",
            "--recovery",
            "live",
            "--events-file",
            events(node)};
  }

  static std::vector<std::string> train_args(const std::string& snapshot,
                                             const std::string& metrics) {
    return {"train",
            "data_config.truncate=0.2",
            "data_config.block_size=32",
            "gpt_config.n_layer=1",
            "gpt_config.n_head=2",
            "gpt_config.n_embd=32",
            "trainer_config.batch_size=8",
            "trainer_config.steps_per_epoch=300",
            "trainer_config.max_epochs=3",
            "trainer_config.eval_batches=1",
            "trainer_config.log_every=1",
            "trainer_config.sample_tokens=0",
            "trainer_config.save_every_steps=10",
            "trainer_config.snapshot_path=" + snapshot,
            "trainer_config.metrics_path=" + metrics};
  }

  std::unique_ptr<Process> start(int node, std::map<std::string, std::string> env = {}) const {
    env["OMP_NUM_THREADS"] = "1";
    return std::make_unique<Process>(command(node), output(node), env);
  }
};

// Whether node's latest round (started or resumed) has `nodes` nodes.
bool in_round_of(const std::string& events_path, int nodes) {
  const auto formed = events_named(events_path, "round_formed");
  return !formed.empty() && formed.back()["group_world_size"] == nodes;
}

// (epoch, step) of every step line rank 0 printed, in order.
std::vector<std::pair<int, int>> steps_printed(const std::string& output) {
  static const std::regex step(R"(epoch (\d+)/\d+ \| iter (\d+)/\d+)");
  std::vector<std::pair<int, int>> steps;
  for (std::sregex_iterator it(output.begin(), output.end(), step), end; it != end; ++it) {
    steps.emplace_back(std::stoi((*it)[1]), std::stoi((*it)[2]));
  }
  return steps;
}

// generation -> crc32 of the parameters as each "live recovery: generation G: ..." line says.
std::map<int, std::string> checksums(const std::string& output) {
  static const std::regex line(
      R"(live recovery: generation (\d+): .* parameters crc32 ([0-9a-f]{8}))");
  std::map<int, std::string> found;
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    found[std::stoi((*it)[1])] = (*it)[2];
  }
  return found;
}

// The committed step a survivor stopped after, and the one it went on from, per recovery.
std::vector<std::pair<int, int>> stop_and_resume_steps(const std::string& output) {
  static const std::regex stop(R"(stops after step (\d+))");
  static const std::regex resume(R"(the state of step (\d+))");
  std::vector<int> stops;
  std::vector<int> resumes;
  for (std::sregex_iterator it(output.begin(), output.end(), stop), end; it != end; ++it) {
    stops.push_back(std::stoi((*it)[1]));
  }
  for (std::sregex_iterator it(output.begin(), output.end(), resume), end; it != end; ++it) {
    resumes.push_back(std::stoi((*it)[1]));
  }
  std::vector<std::pair<int, int>> pairs;
  for (size_t k = 0; k < std::min(stops.size(), resumes.size()); ++k) {
    pairs.emplace_back(stops[k], resumes[k]);
  }
  return pairs;
}

// SIGSTOP then SIGKILL to the node's agent and its workers: the node is gone at once.
void lose_node(Process& agent, const std::string& events_path) {
  std::vector<pid_t> pids = latest_worker_pids(events_path);
  pids.push_back(agent.pid());
  for (const pid_t pid : pids) {
    ::kill(pid, SIGSTOP);
  }
  for (const pid_t pid : pids) {
    ::kill(pid, SIGKILL);
  }
  agent.wait_exit(10s);
}

size_t count_steps(const Process& node) {
  return steps_printed(node.output()).size();
}

bool wait_for_steps_after(const LiveJob& job, const Process& head, size_t after,
                          std::chrono::milliseconds limit) {
  return wait_for_file(
      job.output(1), [&](const std::string& text) { return steps_printed(text).size() > after; },
      limit);
  (void)head;
}

// Where the world changed: from (epoch, step) on, `world` ranks.
struct WorldChange {
  int epoch = 1;
  int step = 0;
  int world = 0;
};

// The worlds the job trained in, from node 1's events (each round's size) and its live recovery
// lines (the position each round went on from).
std::vector<WorldChange> world_changes(const LiveJob& job) {
  static const std::regex line(
      R"(live recovery: generation (\d+): rank \d+ of (\d+) \w+ the state of step \d+ )"
      R"(\(epoch (\d+), step (\d+)\))");
  std::vector<WorldChange> changes;
  const auto formed = events_named(job.events(1), "round_formed");
  REQUIRE(!formed.empty());
  changes.push_back({1, 0, formed.front()["world_size"].get<int>()});
  const std::string output = read_file(job.output(1));
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    changes.push_back({std::stoi((*it)[3]), std::stoi((*it)[4]), std::stoi((*it)[2])});
  }
  return changes;
}

// (epoch, iter) -> train loss of every step line in these metrics files.
std::map<std::pair<int, int>, double> step_losses(const std::vector<std::string>& paths) {
  std::map<std::pair<int, int>, double> losses;
  for (const auto& path : paths) {
    std::istringstream lines(read_file(path));
    for (std::string text; std::getline(lines, text);) {
      const auto line = nlohmann::json::parse(text);
      if (line["kind"] == "step") {
        losses[{line["epoch"].get<int>(), line["iter"].get<int>()}] =
            line["train_loss"].get<double>();
      }
    }
  }
  return losses;
}

// The reference: the same training as one node per world, each stopped where the live job's
// world changed (trainer_config.stop_after) and resumed from its snapshot in the next world.
std::map<std::pair<int, int>, double> reference_losses(const std::vector<WorldChange>& changes) {
  TempDir dir;
  for (size_t k = 0; k < changes.size(); ++k) {
    const auto& from = changes[k];
    const bool last = k + 1 == changes.size();
    if (!last && changes[k + 1].epoch == from.epoch && changes[k + 1].step == from.step) {
      continue;  // a world without steps
    }
    std::vector<std::string> argv{ddprun_binary(), "--standalone", "--nproc_per_node",
                                  std::to_string(from.world)};
    const auto train = LiveJob::train_args(dir / "snapshot.pt", dir / "metrics");
    argv.insert(argv.end(), train.begin(), train.end());
    if (!last) {
      argv.push_back("trainer_config.stop_after=" + std::to_string(changes[k + 1].epoch) + ":" +
                     std::to_string(changes[k + 1].step));
    }
    Process run(argv, dir / ("out." + std::to_string(k)), {{"OMP_NUM_THREADS", "1"}});
    const auto status = run.wait_exit(120s);
    INFO(run.output());
    REQUIRE(status == 0);
  }
  return step_losses({dir / "metrics"});
}

// Every node's output, for a failure's message.
std::string outputs(const LiveJob& job) {
  std::string text;
  for (const int node : {1, 2, 3, 4}) {
    text += "---- node " + std::to_string(node) + ":\n" + read_file(job.output(node));
  }
  return text;
}

// Every node given ended with status 0; else the outputs of all say why.
void require_success(const LiveJob& job, const std::vector<std::optional<int>>& exits) {
  INFO(outputs(job));
  for (const auto& exit : exits) {
    INFO("exit status " << (exit ? std::to_string(*exit) : "none: still running"));
    REQUIRE(exit == 0);
  }
}

}  // namespace

TEST_CASE("a lost node's survivors keep their workers; a replacement takes the state from them",
          "[live][integration]") {
  LiveJob job;
  // Heartbeats that would take 20 s to call the node lost: the survivors' broken collectives
  // re-form the round first.
  job.rdzv_conf =
      "join_timeout=30,last_call_timeout=0.5,keep_alive_interval=2,keep_alive_max_attempt=10";
  auto a = job.start(1);
  auto b = job.start(2);
  auto c = job.start(3);
  // The three form one round (perhaps after a first of two, which the third re-forms live).
  REQUIRE(wait_for_file(
      job.events(1), [&](const std::string&) { return in_round_of(job.events(1), 3); }, 60s));
  REQUIRE(wait_for_steps_after(job, *a, count_steps(*a) + 5, 60s));

  lose_node(*c, job.events(3));
  // The survivors re-form as two and go on with the workers they had.
  REQUIRE(wait_for_file(
      job.events(1), [&](const std::string&) { return in_round_of(job.events(1), 2); }, 30s));
  REQUIRE(wait_for_steps_after(job, *a, count_steps(*a) + 3, 30s));

  auto d = job.start(4);
  const auto exits = std::vector{a->wait_exit(120s), b->wait_exit(30s), d->wait_exit(30s)};
  require_success(job, exits);
  const std::string out_a = a->output();
  const std::string out_b = b->output();
  const std::string out_d = d->output();
  INFO("node 1:\n" << out_a << "\nnode 2:\n" << out_b << "\nnode 4:\n" << out_d);

  // The loss was seen by the survivors' workers and reported at once, not by the heartbeats.
  const auto broke = events_named(job.events(1), "collective_broke").size() +
                     events_named(job.events(2), "collective_broke").size();
  CHECK(broke >= 1);
  CHECK(events_named(job.events(1), "node_lost").empty());
  CHECK(events_named(job.events(2), "node_lost").empty());

  // The survivors' workers were started once and kept through both changes.
  for (const int node : {1, 2}) {
    const auto started = events_named(job.events(node), "workers_started");
    const auto resumed = events_named(job.events(node), "workers_resumed");
    REQUIRE(started.size() == 1);
    REQUIRE(resumed.size() >= 2);
    for (const auto& event : resumed) {
      CHECK(event["pids"] == started.front()["pids"]);
    }
  }
  // The replacement started fresh workers, in a round of three.
  CHECK(events_named(job.events(4), "workers_started").size() == 1);
  CHECK(in_round_of(job.events(4), 3));

  // No step was taken twice: rank 0's step lines only go forward, and every recovery goes on
  // from the step in flight at the latest.
  const auto steps = steps_printed(out_a);
  REQUIRE(!steps.empty());
  CHECK(std::adjacent_find(steps.begin(), steps.end(),
                           [](const auto& x, const auto& y) { return !(x < y); }) == steps.end());
  CHECK(steps.back() == std::make_pair(3, 300));
  for (const auto& output : {out_a, out_b}) {
    const auto recoveries = stop_and_resume_steps(output);
    REQUIRE(recoveries.size() >= 2);
    for (const auto& [stopped, resumed] : recoveries) {
      CHECK(resumed >= stopped);
      CHECK(resumed <= stopped + 1);
    }
  }

  // The replacement holds the survivors' parameters once it joined.
  const auto sums_a = checksums(out_a);
  const auto sums_b = checksums(out_b);
  const auto sums_d = checksums(out_d);
  REQUIRE(!sums_d.empty());
  for (const auto& [generation, sum] : sums_d) {
    CHECK(sums_a.at(generation) == sum);
    CHECK(sums_b.at(generation) == sum);
  }
  CHECK_THAT(out_d, Catch::Contains("took the state of step"));
  CHECK_THAT(out_d, !Catch::Contains("resumed from"));  // not from the snapshot file

  // The losses are those of a run in the same worlds at the same steps. The tolerance only
  // allows for the last bit of a sum: the arithmetic is the same, in the same order.
  const auto live = step_losses({job.metrics(1), job.metrics(2), job.metrics(4)});
  const auto changes = world_changes(job);
  REQUIRE(changes.size() >= 3);  // three nodes, two, three again
  const auto reference = reference_losses(changes);
  // Rank 0 prints a step when its own all-reduce completed: a step in flight that another rank
  // committed and rank 0 took from it is missing from rank 0's lines (one per recovery at most).
  size_t missing = 0;
  for (const auto& [step, loss] : reference) {
    INFO("epoch " << step.first << " step " << step.second);
    if (!live.contains(step)) {
      ++missing;
      continue;
    }
    CHECK(live.at(step) == Approx(loss).epsilon(1e-9));
  }
  CHECK(missing <= changes.size() - 1);
  CHECK(live.size() + missing == reference.size());
}

TEST_CASE("a peer lost while it sends the state: every worker restarts from the snapshot",
          "[live][integration]") {
  LiveJob job;
  // Node 1's worker is rank 0, the one that sends the state: it dies as it starts to.
  auto a = job.start(1, {{"DDPRUN_TRAIN_TEST_DIE_SENDING_STATE", "1"}});
  auto b = job.start(2);
  auto c = job.start(3);
  REQUIRE(wait_for_file(
      job.events(1), [&](const std::string&) { return in_round_of(job.events(1), 3); }, 60s));
  // Past the first snapshot (every 10 steps), so that the restart has one to resume from.
  REQUIRE(wait_for_steps_after(job, *a, count_steps(*a) + 15, 60s));
  lose_node(*c, job.events(3));

  const auto exits = std::vector{a->wait_exit(120s), b->wait_exit(30s)};
  require_success(job, exits);
  const std::string out_a = a->output();
  const std::string out_b = b->output();
  INFO("node 1:\n" << out_a << "\nnode 2:\n" << out_b);
  CHECK_THAT(out_b, Catch::Contains("the state transfer from rank 0 failed"));
  CHECK_THAT(out_b, Catch::Contains("falling back to a restart"));
  // The fallback is the ordinary restart: new workers, which resume from the snapshot.
  CHECK(events_named(job.events(2), "workers_started").size() == 2);
  CHECK_THAT(out_a, Catch::Contains("resumed from"));
  bool reason_recorded = false;
  for (const auto& failure : events_named(job.events(2), "failure")) {
    reason_recorded = reason_recorded || failure["message"].get<std::string>().find(
                                             "state transfer") != std::string::npos;
  }
  CHECK(reason_recorded);
  CHECK(steps_printed(out_a).back() == std::make_pair(3, 300));
}

TEST_CASE("a spare takes a lost node's place with the survivor's state", "[live][integration]") {
  LiveJob job;
  job.nnodes = "2:2";  // node 3 waits as a spare
  job.rdzv_conf =
      "join_timeout=30,last_call_timeout=0.5,keep_alive_interval=2,keep_alive_max_attempt=10";
  auto a = job.start(1);
  auto b = job.start(2);
  REQUIRE(wait_for_file(
      job.events(1), [&](const std::string&) { return in_round_of(job.events(1), 2); }, 60s));
  auto spare = job.start(3);
  REQUIRE(wait_for_file(
      job.output(3),
      [](const std::string& text) { return text.find("joining") != std::string::npos; }, 60s));
  REQUIRE(wait_for_steps_after(job, *a, count_steps(*a) + 5, 60s));
  lose_node(*b, job.events(2));

  const auto exits = std::vector{a->wait_exit(120s), spare->wait_exit(30s)};
  require_success(job, exits);
  CHECK(events_named(job.events(1), "workers_started").size() == 1);
  CHECK(events_named(job.events(1), "workers_resumed").size() == 1);
  CHECK(events_named(job.events(1), "collective_broke").size() == 1);
  CHECK(events_named(job.events(1), "node_lost").empty());
  const auto sums_a = checksums(read_file(job.output(1)));
  const auto sums_spare = checksums(read_file(job.output(3)));
  REQUIRE(sums_spare.size() == 1);
  CHECK(sums_a.at(sums_spare.begin()->first) == sums_spare.begin()->second);
  // The job's last step, printed by whichever node's worker is rank 0 by then.
  auto steps = steps_printed(read_file(job.output(1)));
  const auto spare_steps = steps_printed(read_file(job.output(3)));
  steps.insert(steps.end(), spare_steps.begin(), spare_steps.end());
  CHECK(std::find(steps.begin(), steps.end(), std::make_pair(3, 300)) != steps.end());
}
