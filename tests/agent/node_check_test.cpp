// --health-check end to end: three real ddprun agents on 127.0.0.2-4 with --nnodes 2:3 and a
// c10d rendezvous on loopback. The third fails its check, before its first join or before its
// re-join after a worker failure: the other two form a round of two without it and finish; it
// says why, does not join, checks again after the interval, and a SIGTERM ends it at once.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "e2e_support.hpp"
#include "events_file.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;

namespace {

// Node 127.0.0.<node> of a 2:3 job whose workers run `worker` (/bin/sh -c, $DIR set).
std::vector<std::string> agent_argv(const TempDir& dir, uint16_t port, int node,
                                    const std::string& health_check, const std::string& worker,
                                    int max_restarts = 0) {
  return {ddprun_binary(),
          "--nnodes",
          "2:3",
          "--nproc-per-node",
          "2",
          "--rdzv-backend",
          "c10d",
          "--rdzv-endpoint",
          "127.0.0.2:" + std::to_string(port),
          "--rdzv-id",
          "node-check",
          "--rdzv-conf",
          kFastRdzv + (node == 2 ? ",is_host=1" : ",is_host=0"),
          "--local-addr",
          "127.0.0." + std::to_string(node),
          "--log-dir",
          dir / ("logs-" + std::to_string(node)),
          "--events-file",
          dir / ("events-" + std::to_string(node)),
          "--health-check",
          health_check,
          "--health-check-interval",
          "1",
          "--health-check-timeout",
          "20",
          "--max-restarts",
          std::to_string(max_restarts),
          "--shutdown-timeout",
          "3",
          "--no-python",
          "/bin/sh",
          "-c",
          worker};
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

}  // namespace

TEST_CASE("a node that fails its --health-check does not join; the others form the round") {
  TempDir dir;
  const uint16_t port = free_port("127.0.0.2");
  const std::map<std::string, std::string> env{{"DIR", dir.path()}};
  // The failing node first, so it is there before the round closes.
  const std::string worker = "echo \"$RANK $WORLD_SIZE\" > $DIR/rank-$RANK";
  Process c(agent_argv(dir, port, 4, "echo checking; echo \"disk bad\" >&2; exit 3", worker),
            dir / "agent-4", env);
  Process a(agent_argv(dir, port, 2, "true", worker), dir / "agent-2", env);
  Process b(agent_argv(dir, port, 3, "test -d \"$DIR\"", worker), dir / "agent-3", env);

  const auto status_a = a.wait_exit(60s);
  const auto status_b = b.wait_exit(60s);
  INFO("A:\n" << a.output() << "\nB:\n" << b.output() << "\nC:\n" << c.output());
  CHECK(status_a == 0);
  CHECK(status_b == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(read_file(dir / ("rank-" + std::to_string(rank))) ==
          std::to_string(rank) + " 4\n");  // one round of 2 nodes x 2 workers
  }
  CHECK_FALSE(fs::exists(dir / "rank-4"));
  const auto formed = events_named(dir / "events-2", "round_formed");
  REQUIRE(formed.size() == 1);
  CHECK(formed[0]["world_size"] == 4);
  CHECK(events_named(dir / "events-2", "node_check_passed").size() == 1);

  // C reports and retries: two failures, a second after the interval. The agent prints each
  // before it records the event, so waiting for the events waits for both.
  REQUIRE(wait_for_file(
      dir / "events-4",
      [](const std::string& text) { return count_of(text, "node_check_failed") >= 2; }, 30s));
  const std::string c_output = c.output();
  CHECK(c_output.find("ddprun: node check failed on 127.0.0.4: health check command: exit "
                      "status 3: checking | disk bad; not joining round 0, retrying in 1 s") !=
        std::string::npos);
  CHECK(events_named(dir / "events-4", "node_check_failed").size() >= 2);
  CHECK(events_named(dir / "events-4", "round_formed").empty());
  CHECK(c.wait_exit(0ms) == std::nullopt);  // still there, waiting to check again

  c.signal(SIGTERM);
  CHECK(c.wait_exit(10s) == 128 + SIGTERM);
}

TEST_CASE(
    "a member that fails its --health-check after a failure does not re-join; the rest go on") {
  TempDir dir;
  const uint16_t port = free_port("127.0.0.2");
  const std::map<std::string, std::string> env{{"DIR", dir.path()}};
  // Attempt 0: once all three nodes are in the round (a slow agent may join late, which re-forms
  // the round without a restart), rank 0 fails, the others run until stopped. Attempt 1: every
  // rank records its world size and succeeds.
  const std::string worker =
      "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then"
      "  [ \"$RANK\" = 0 ] && [ \"$WORLD_SIZE\" = 6 ] && exit 1; while :; do sleep 0.05; done;"
      "fi;"
      "echo \"$RANK $WORLD_SIZE\" > $DIR/rank-$RANK";
  // C passes its first check and fails every later one.
  const std::string flaky =
      "[ -f $DIR/c-checked ] && { echo 'GPU 3 fell off the bus' >&2; exit 1; };"
      "touch $DIR/c-checked";
  Process a(agent_argv(dir, port, 2, "true", worker, 1), dir / "agent-2", env);
  Process b(agent_argv(dir, port, 3, "true", worker, 1), dir / "agent-3", env);
  Process c(agent_argv(dir, port, 4, flaky, worker, 1), dir / "agent-4", env);

  const auto status_a = a.wait_exit(60s);
  const auto status_b = b.wait_exit(60s);
  INFO("A:\n" << a.output() << "\nB:\n" << b.output() << "\nC:\n" << c.output());
  CHECK(status_a == 0);
  CHECK(status_b == 0);
  const auto formed = events_named(dir / "events-2", "round_formed");
  REQUIRE(formed.size() >= 2);
  CHECK(formed[formed.size() - 2]["world_size"] == 6);  // all three nodes, then the failure
  CHECK(formed.back()["world_size"] == 4);              // the restart, without C
  CHECK(formed.back()["restart_count"] == 1);
  for (int rank = 0; rank < 4; ++rank)
    CHECK(read_file(dir / ("rank-" + std::to_string(rank))) == std::to_string(rank) + " 4\n");

  // The event comes after the printed line (see the first case).
  REQUIRE(wait_for_file(
      dir / "events-4",
      [](const std::string& text) { return count_of(text, "node_check_failed") >= 1; }, 30s));
  const std::string without_c = std::to_string(formed.back()["round"].get<int>());
  CHECK(c.output().find("node check failed on 127.0.0.4: health check command: exit status 1: "
                        "GPU 3 fell off the bus; not joining round " +
                        without_c + ", retrying in 1 s") != std::string::npos);
  for (const auto& joined : events_named(dir / "events-4", "round_formed"))
    CHECK(joined["restart_count"] == 0);  // C never joined the restart
  const auto failed = events_named(dir / "events-4", "node_check_failed");
  REQUIRE_FALSE(failed.empty());
  CHECK(failed[0]["round"] == formed.back()["round"]);

  c.signal(SIGTERM);
  CHECK(c.wait_exit(10s) == 128 + SIGTERM);
}
