// The rendezvous backends over real sockets: several handlers (nodes) in this process, each
// driven from its own thread, against a real store (external, or hosted by one of them).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <set>

#include "agent/rendezvous_handler.hpp"
#include "e2e_support.hpp"
#include "launcher/launch_config.hpp"
#include "rendezvous/store/store_client.hpp"
#include "rendezvous/store/store_server.hpp"
#include "tests/rendezvous/child_process.hpp"

using namespace ddprun;
using agent::RendezvousError;
using agent::RendezvousHandler;
using agent::RoundInfo;
using agent::RoundSignal;
using Handler = std::unique_ptr<RendezvousHandler>;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

using agent::e2e::free_port;

struct ExternalStore {
  std::unique_ptr<rendezvous::store::StoreServer> server = [] {
    rendezvous::store::StoreServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    return rendezvous::store::StoreServer::start(options);
  }();
  uint16_t port() const { return server->port(); }
};

// Short timeouts. Heartbeats are relaxed (lost after ~5.5 s) so a loaded CI machine never
// loses a healthy node; the loss tests use kFastBeat.
std::map<std::string, std::string> quick_conf(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> conf = {
      {"join_timeout", "20"},       {"last_call_timeout", "0.3"},    {"close_timeout", "5"},
      {"keep_alive_interval", "2"}, {"keep_alive_max_attempt", "3"}, {"read_timeout", "10"}};
  for (auto& [k, v] : extra) {
    conf[k] = v;
  }
  return conf;
}

// Loss tests: a stopped node is lost within 0.4 x 3 s.
constexpr double kFastBeatS = 0.4;
const std::map<std::string, std::string> kFastBeat = {{"keep_alive_interval", "0.4"}};

launcher::LaunchConfig c10d_node(const std::string& endpoint_host, uint16_t port,
                                 const std::string& local_addr, int min_nodes, int max_nodes,
                                 std::map<std::string, std::string> conf = quick_conf(),
                                 const std::string& run_id = "job") {
  launcher::LaunchConfig c;
  c.rdzv_backend = "c10d";
  c.rdzv_host = endpoint_host;
  c.rdzv_port = port;
  c.rdzv_endpoint = endpoint_host + ":" + std::to_string(port);
  c.rdzv_id = run_id;
  c.rdzv_conf = std::move(conf);
  c.local_addr = local_addr;
  c.min_nodes = min_nodes;
  c.max_nodes = max_nodes;
  c.nproc_per_node = 2;
  c.max_restarts = 1;
  return c;
}

// Every node of an external-store job: is_host=0.
launcher::LaunchConfig client_node(uint16_t port, const std::string& local_addr, int min_nodes,
                                   int max_nodes, std::map<std::string, std::string> extra = {}) {
  extra["is_host"] = "0";
  return c10d_node("127.0.0.1", port, local_addr, min_nodes, max_nodes, quick_conf(extra));
}

std::vector<RoundInfo> form(const std::vector<RendezvousHandler*>& nodes) {
  std::vector<std::future<RoundInfo>> futures;
  for (auto* node : nodes) {
    futures.push_back(std::async(std::launch::async, [node] { return node->next_round(); }));
  }
  std::vector<RoundInfo> rounds;
  for (auto& f : futures) {
    REQUIRE(f.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    rounds.push_back(f.get());
  }
  return rounds;
}

bool readable_within(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

void check_consistent(const std::vector<RoundInfo>& rounds, int nproc) {
  std::set<int> ranks;
  for (const auto& r : rounds) {
    CHECK(r.round == rounds[0].round);
    CHECK(r.group_world_size == static_cast<int>(rounds.size()));
    CHECK(r.world_size == nproc * static_cast<int>(rounds.size()));
    CHECK(r.base_global_rank == nproc * r.group_rank);
    CHECK(r.restart_count == rounds[0].restart_count);
    CHECK(r.master_addr == rounds[0].master_addr);
    CHECK(r.master_port == rounds[0].master_port);
    CHECK(r.run_id == rounds[0].run_id);
    ranks.insert(r.group_rank);
  }
  CHECK(ranks.size() == rounds.size());
}

void check_workers_store_reachable(const RoundInfo& round) {
  rendezvous::store::StoreClientOptions options;
  options.host = round.master_addr;
  options.port = round.master_port;
  options.connect_timeout = std::chrono::seconds(5);
  auto client = rendezvous::store::StoreClient::connect(options);
  client->set("/probe", "1");
  CHECK(client->get("/probe") == "1");
}

agent::WorkerFailure failure_at(double timestamp, const std::string& host, int rank) {
  agent::WorkerFailure f;
  f.timestamp_s = timestamp;
  f.host = host;
  f.global_rank = rank;
  f.local_rank = 0;
  f.exit_code = 1;
  f.pid = 100 + rank;
  f.message = "exit 1 on " + host;
  return f;
}

}  // namespace

TEST_CASE("c10d: 3 nodes form with consistent, address-ordered ranks, kept across restarts") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.4", 3, 3));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 3, 3));
  auto c = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 3, 3));
  auto first = form({a.get(), b.get(), c.get()});
  check_consistent(first, 2);
  CHECK(first[1].group_rank == 0);  // 127.0.0.2
  CHECK(first[2].group_rank == 1);
  CHECK(first[0].group_rank == 2);
  CHECK(first[0].restart_count == 0);
  CHECK(first[0].master_addr == "127.0.0.2");  // rank 0's address
  check_workers_store_reachable(first[0]);
  CHECK(a->poll() == RoundSignal::kNone);

  // A worker of node c fails: one restart is allowed, every node learns at once.
  const auto reported = Clock::now();
  CHECK(c->report_failure({failure_at(50.0, "127.0.0.3", 2)}));
  for (auto* node : {a.get(), b.get()}) {
    REQUIRE(readable_within(node->wakeup_fd(), 3000));
    CHECK(node->poll() == RoundSignal::kRestartRequested);
  }
  CHECK(seconds_since(reported) < 1.0);
  auto second = form({a.get(), b.get(), c.get()});
  check_consistent(second, 2);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(second[i].group_rank == first[i].group_rank);  // same membership, same ranks
    CHECK(second[i].restart_count == 1);
  }
  CHECK(second[0].round > first[0].round);
  CHECK(second[0].master_port != first[0].master_port);  // a fresh workers' store
  check_workers_store_reachable(second[0]);

  // Two nodes fail in the same round: counted once, and restarts are now exhausted.
  CHECK_FALSE(b->report_failure({failure_at(70.0, "127.0.0.2", 0)}));
  CHECK_FALSE(a->report_failure({failure_at(71.0, "127.0.0.4", 4)}));
  REQUIRE(readable_within(c->wakeup_fd(), 3000));
  CHECK(c->poll() == RoundSignal::kJobFailed);
  for (auto* node : {a.get(), b.get(), c.get()}) {
    auto failures = node->job_failures();
    REQUIRE(failures.size() == 3);
    CHECK(failures[0].host == "127.0.0.3");  // the root cause: the earliest
    CHECK(failures[0].timestamp_s == 50.0);
    CHECK(failures[1].host == "127.0.0.2");
    CHECK(failures[2].host == "127.0.0.4");
  }
  for (auto* node : {a.get(), b.get(), c.get()}) {
    node->shutdown(true);
  }
}

TEST_CASE("c10d: MIN:MAX closes after the last call with the nodes present") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 2, 3));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 2, 3));
  const auto start = Clock::now();
  auto rounds = form({a.get(), b.get()});
  const double took = seconds_since(start);
  check_consistent(rounds, 2);
  CHECK(rounds[0].group_world_size == 2);
  CHECK(took >= 0.25);  // the last call (0.3 s) ran
  CHECK(took < 3.0);
}

TEST_CASE("c10d: a node arriving during the round wakes it; the job grows, not a restart") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 2, 3));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 2, 3));
  auto first = form({a.get(), b.get()});
  CHECK(first[0].group_world_size == 2);

  auto c = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.4", 2, 3));
  auto joining = std::async(std::launch::async, [&] { return c->next_round(); });
  const auto arrived = Clock::now();
  for (auto* node : {a.get(), b.get()}) {
    REQUIRE(readable_within(node->wakeup_fd(), 5000));
    CHECK(node->poll() == RoundSignal::kMembershipChange);
  }
  CHECK(seconds_since(arrived) < 2.0);
  auto grown_ab = form({a.get(), b.get()});
  REQUIRE(joining.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  std::vector<RoundInfo> grown = {grown_ab[0], grown_ab[1], joining.get()};
  check_consistent(grown, 2);
  CHECK(grown[0].group_world_size == 3);
  CHECK(grown[0].restart_count == 0);  // membership changes are not restarts
  CHECK(grown[0].round > first[0].round);
  // Three known nodes: the round closed as soon as all three were back, no last call needed.
  CHECK(seconds_since(arrived) < 3.0);
}

TEST_CASE("c10d: a lost node is detected within the keep-alive bound; a spare takes its place") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 1, 2, kFastBeat));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 1, 2, kFastBeat));
  form({a.get(), b.get()});

  // A third node at MAX is a spare: it must not interrupt the running round.
  auto spare =
      agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.4", 1, 2, kFastBeat));
  auto spare_round = std::async(std::launch::async, [&] { return spare->next_round(); });
  CHECK_FALSE(readable_within(a->wakeup_fd(), 500));
  CHECK(a->poll() == RoundSignal::kNone);

  // Node b dies without a word: its heartbeats stop.
  const auto died = Clock::now();
  b.reset();
  REQUIRE(readable_within(a->wakeup_fd(), 5000));
  const double detected = seconds_since(died);
  CHECK(a->poll() == RoundSignal::kMembershipChange);
  CHECK(detected <= kFastBeatS * 3 + 0.3);
  CHECK(detected >= kFastBeatS);
  auto survivor = a->next_round();
  REQUIRE(spare_round.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  auto joined = spare_round.get();
  check_consistent({survivor, joined}, 2);
  CHECK(survivor.group_world_size == 2);
  CHECK(survivor.restart_count == 0);
  // Loss to re-formed: within keep_alive_interval x keep_alive_max_attempt + 1 s.
  CHECK(seconds_since(died) <= kFastBeatS * 3 + 1.0);
}

TEST_CASE("c10d: a node stopped by a signal leaves; the others re-form without it at once") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 2, 3));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 2, 3));
  auto c = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.4", 2, 3));
  form({a.get(), b.get(), c.get()});
  const auto left = Clock::now();
  c->shutdown(false);
  for (auto* node : {a.get(), b.get()}) {
    REQUIRE(readable_within(node->wakeup_fd(), 2000));
    CHECK(node->poll() == RoundSignal::kMembershipChange);
  }
  // b's workers die of the loss (a peer's connection reset): not a restart.
  CHECK(b->report_failure({failure_at(5.0, "127.0.0.3", 2)}));
  auto rounds = form({a.get(), b.get()});
  check_consistent(rounds, 2);
  CHECK(rounds[0].group_world_size == 2);
  CHECK(rounds[0].restart_count == 0);
  CHECK(a->job_failures().empty());
  CHECK(seconds_since(left) < 1.0);  // expected count reached: no last call
}

TEST_CASE("c10d: a store that stalls for longer than heartbeat_timeout is not a lost store") {
  // A real ddprun-store process, stopped and continued: it keeps its connections but answers
  // nothing, as an overloaded store host does (1,024 agents on 2 cores stall it for seconds).
  rendezvous::store::testing::StoreDaemon store;
  const uint16_t port = store.port;
  const std::map<std::string, std::string> conf = {{"heartbeat_timeout", "0.3"},
                                                   {"keep_alive_interval", "1"}};
  auto a = agent::make_rendezvous_handler(client_node(port, "127.0.0.2", 2, 3, conf));
  auto b = agent::make_rendezvous_handler(client_node(port, "127.0.0.3", 2, 3, conf));
  form({a.get(), b.get()});

  // Stopped for 1.5 s: five times heartbeat_timeout, less than the 3 s keep-alive window and
  // the 10 s read_timeout.
  store.process.signal(SIGSTOP);
  CHECK_FALSE(readable_within(a->wakeup_fd(), 1500));
  CHECK_FALSE(readable_within(b->wakeup_fd(), 0));
  store.process.signal(SIGCONT);
  CHECK_FALSE(readable_within(a->wakeup_fd(), 1000));
  CHECK(a->poll() == RoundSignal::kNone);
  CHECK(b->poll() == RoundSignal::kNone);

  // The watchers still work: b leaving wakes a.
  b->shutdown(false);
  REQUIRE(readable_within(a->wakeup_fd(), 3000));
  CHECK(a->poll() == RoundSignal::kMembershipChange);
}

TEST_CASE("c10d: below MIN the survivors wait for a replacement, which rejoins") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 2, 2, kFastBeat));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 2, 2, kFastBeat));
  form({a.get(), b.get()});
  b.reset();
  REQUIRE(readable_within(a->wakeup_fd(), 5000));
  CHECK(a->poll() == RoundSignal::kMembershipChange);
  auto waiting = std::async(std::launch::async, [&] { return a->next_round(); });
  CHECK(waiting.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);
  auto back =
      agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 2, 2, kFastBeat));
  auto returned = back->next_round();
  REQUIRE(waiting.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  auto survivor = waiting.get();
  check_consistent({survivor, returned}, 2);
  CHECK(survivor.group_rank == 0);
  CHECK(returned.group_rank == 1);
}

TEST_CASE("c10d: the endpoint's agent hosts the store; exit barrier; host leaves last") {
  const uint16_t port = free_port("127.0.0.2");
  // Agents on 127.0.0.2 and 127.0.0.3 of this machine; the endpoint is 127.0.0.2.
  auto host = agent::make_rendezvous_handler(c10d_node("127.0.0.2", port, "127.0.0.2", 2, 2));
  auto other = agent::make_rendezvous_handler(c10d_node("127.0.0.2", port, "127.0.0.3", 2, 2));
  auto rounds = form({host.get(), other.get()});
  check_consistent(rounds, 2);

  auto host_barrier =
      std::async(std::launch::async, [&] { host->exit_barrier(std::chrono::seconds(10)); });
  CHECK(host_barrier.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  other->exit_barrier(std::chrono::seconds(10));
  REQUIRE(host_barrier.wait_for(std::chrono::seconds(5)) == std::future_status::ready);

  auto host_leaves = std::async(std::launch::async, [&] { host->shutdown(true); });
  CHECK(host_leaves.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  other->shutdown(true);
  REQUIRE(host_leaves.wait_for(std::chrono::seconds(5)) == std::future_status::ready);

  // The rendezvous is closed: a late agent gets a clear error, not a hang.
  auto late = agent::make_rendezvous_handler(c10d_node("127.0.0.2", port, "127.0.0.4", 2, 2));
  CHECK_THROWS_WITH(late->next_round(), Catch::Contains("closed"));
}

TEST_CASE("c10d: a heuristic host that cannot bind becomes a client; a forced one fails") {
  const uint16_t port = free_port("127.0.0.2");
  // No --local_addr: a loopback endpoint matches this machine for both agents. The first binds,
  // the second finds the port taken and joins as a client, as torchrun does.
  auto first = c10d_node("127.0.0.2", port, "", 2, 2);
  first.local_addr.reset();
  auto a = agent::make_rendezvous_handler(first);
  auto b = agent::make_rendezvous_handler(first);
  auto rounds = form({a.get(), b.get()});
  check_consistent(rounds, 2);

  auto forced = c10d_node("127.0.0.2", port, "127.0.0.3", 2, 2, quick_conf({{"is_host", "1"}}));
  CHECK_THROWS_WITH(agent::make_rendezvous_handler(forced), Catch::Contains("is_host=1"));
}

TEST_CASE("c10d: a failure after another node finished fails the job; nobody hangs") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 2, 2));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 2, 2));
  form({a.get(), b.get()});
  // a's workers succeeded: it waits in the exit barrier (for up to 30 s).
  auto barrier = std::async(std::launch::async, [&] { a->exit_barrier(std::chrono::seconds(30)); });
  REQUIRE(barrier.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  // b's worker fails: a restart is allowed by max_restarts, but a is done, so the job fails.
  const auto failed = Clock::now();
  CHECK_FALSE(b->report_failure({failure_at(1.0, "127.0.0.3", 2)}));
  REQUIRE(barrier.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(seconds_since(failed) < 2.0);
  CHECK(a->poll() == RoundSignal::kJobFailed);
  CHECK(a->job_failures().size() == 1);
}

TEST_CASE("c10d: agents with different --nnodes fail with both values named") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.2", 2, 2));
  auto b = agent::make_rendezvous_handler(client_node(store.port(), "127.0.0.3", 3, 3));
  auto first = std::async(std::launch::async, [&] { return a->next_round(); });
  std::this_thread::yield();
  const auto start = Clock::now();
  REQUIRE(first.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  CHECK_THROWS_WITH(b->next_round(),
                    Catch::Contains("--nnodes 3") && Catch::Contains("--nnodes 2"));
  REQUIRE(first.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK_THROWS_WITH(first.get(), Catch::Contains("--nnodes 3") && Catch::Contains("--nnodes 2"));
  CHECK(seconds_since(start) < 3.0);
}

TEST_CASE("c10d: an unreachable endpoint fails after join_timeout, naming the endpoint") {
  const uint16_t port = free_port("127.0.0.1");
  const auto start = Clock::now();
  auto config = c10d_node("127.0.0.1", port, "127.0.0.2", 1, 1,
                          quick_conf({{"join_timeout", "1"}, {"is_host", "0"}}));
  CHECK_THROWS_WITH(
      agent::make_rendezvous_handler(config),
      Catch::Contains("127.0.0.1:" + std::to_string(port)) && Catch::Contains("join_timeout"));
  const double took = seconds_since(start);
  CHECK(took >= 0.9);
  CHECK(took < 5.0);
}

TEST_CASE("c10d: too few nodes time out after join_timeout") {
  ExternalStore store;
  auto a = agent::make_rendezvous_handler(
      client_node(store.port(), "127.0.0.2", 2, 2, {{"join_timeout", "0.5"}}));
  const auto start = Clock::now();
  CHECK_THROWS_WITH(a->next_round(),
                    Catch::Contains("join_timeout") && Catch::Contains("1 joined"));
  CHECK(seconds_since(start) < 3.0);
}

TEST_CASE("static: node ranks from --node_rank, node 0 hosts the workers' store, shared restarts") {
  const uint16_t port = free_port("127.0.0.2");
  auto node = [&](int rank, const std::string& addr) {
    launcher::LaunchConfig c;
    c.rdzv_backend = "static";
    c.master_addr = "127.0.0.2";
    c.master_port = port;
    c.rdzv_host = "127.0.0.2";
    c.rdzv_port = port;
    c.node_rank = rank;
    c.node_rank_hint = rank;
    c.local_addr = addr;
    c.min_nodes = c.max_nodes = 2;
    c.nproc_per_node = 3;
    c.max_restarts = 2;
    c.rdzv_conf = {{"join_timeout", "10"}};
    return agent::make_rendezvous_handler(c);
  };
  // Rank 1 on the smaller address: the static order ignores addresses.
  auto zero = node(0, "127.0.0.3");
  auto one = node(1, "127.0.0.2");
  auto rounds = form({zero.get(), one.get()});
  check_consistent(rounds, 3);
  CHECK(rounds[0].group_rank == 0);
  CHECK(rounds[1].group_rank == 1);
  CHECK(rounds[0].master_addr == "127.0.0.2");
  CHECK(rounds[0].master_port == port);
  check_workers_store_reachable(rounds[0]);

  CHECK(one->report_failure({failure_at(1.0, "127.0.0.2", 3)}));
  REQUIRE(readable_within(zero->wakeup_fd(), 3000));
  CHECK(zero->poll() == RoundSignal::kRestartRequested);
  auto again = form({zero.get(), one.get()});
  CHECK(again[0].restart_count == 1);
  CHECK(again[1].restart_count == 1);
  CHECK(zero->job_failures().size() == 1);
  auto zero_barrier =
      std::async(std::launch::async, [&] { zero->exit_barrier(std::chrono::seconds(5)); });
  one->exit_barrier(std::chrono::seconds(5));
  REQUIRE(zero_barrier.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  auto host_leaves = std::async(std::launch::async, [&] { zero->shutdown(true); });
  one->shutdown(true);
  REQUIRE(host_leaves.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
}

TEST_CASE("static: a node with another --nnodes fails fast, and so does node 0") {
  const uint16_t port = free_port("127.0.0.2");
  auto node = [&](int rank, int nnodes) {
    launcher::LaunchConfig c;
    c.rdzv_backend = "static";
    c.rdzv_host = c.master_addr = "127.0.0.2";
    c.rdzv_port = c.master_port = port;
    c.node_rank = rank;
    c.node_rank_hint = rank;
    c.local_addr = "127.0.0." + std::to_string(2 + rank);
    c.min_nodes = c.max_nodes = nnodes;
    c.rdzv_conf = {{"join_timeout", "20"}};
    return agent::make_rendezvous_handler(c);
  };
  auto zero = node(0, 3);
  auto zero_round = std::async(std::launch::async, [&] { return zero->next_round(); });
  REQUIRE(zero_round.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  auto one = node(1, 2);
  CHECK_THROWS_WITH(one->next_round(),
                    Catch::Contains("--nnodes 2") && Catch::Contains("--nnodes 3"));
  REQUIRE(zero_round.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK_THROWS_WITH(zero_round.get(), Catch::Contains("--nnodes"));
}

TEST_CASE("standalone: a private store on a free port and a random run id") {
  launcher::LaunchConfig c;
  c.standalone = true;
  c.rdzv_backend = "c10d";
  c.rdzv_host = "localhost";
  c.rdzv_port = 0;
  c.rdzv_id = "none";
  c.nproc_per_node = 4;
  c.local_addr = "127.0.0.5";
  auto one = agent::make_rendezvous_handler(c);
  auto two = agent::make_rendezvous_handler(c);
  auto r1 = one->next_round();
  auto r2 = two->next_round();  // a second standalone job on the same machine does not clash
  CHECK(r1.run_id != r2.run_id);
  CHECK(r1.run_id.size() >= 16);
  CHECK(r1.world_size == 4);
  CHECK(r1.group_world_size == 1);
  CHECK(r1.master_addr == "127.0.0.5");
  check_workers_store_reachable(r1);
  one->exit_barrier(std::chrono::seconds(1));
  one->shutdown(true);
  two->shutdown(true);
}
