// The rendezvous end to end without worker processes: several HeadlessAgents (the real set-up,
// round machine, driver and store backend) on one event loop in this process, against a real
// store: one an agent hosts, ddprun-store, or PyTorch 1.13's own TCPStore server. The machine's
// interleavings are covered exhaustively by round_machine_test; these check the wiring and the
// real store, with generous limits and no timing assertions.

#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <set>

#include "agent/node/headless_agent.hpp"
#include "e2e_support.hpp"
#include "rendezvous/store/store_server.hpp"
#include "tests/rendezvous/child_process.hpp"
#include "tests/rendezvous/store_client.hpp"

using namespace ddprun;
using agent::HeadlessAgent;
using agent::RendezvousConfig;
using agent::RoundInfo;
using agent::e2e::free_port;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

struct Cluster {
  boost::asio::io_context io;
  std::vector<std::unique_ptr<HeadlessAgent>> agents;

  HeadlessAgent& add(const RendezvousConfig& config) {
    agents.push_back(std::make_unique<HeadlessAgent>(io, config));
    agents.back()->begin();
    return *agents.back();
  }
  // Runs the loop until done() or the limit; returns done().
  template <class Done>
  bool run_until(Done done, std::chrono::seconds limit = 30s) {
    const auto deadline = Clock::now() + limit;
    while (!done() && Clock::now() < deadline) {
      io.restart();
      io.run_for(10ms);
    }
    return done();
  }
  bool all_running(std::size_t n, std::size_t min_rounds = 1) const {
    std::size_t running = 0;
    for (const auto& a : agents) {
      running += a->running() && a->rounds().size() >= min_rounds ? 1 : 0;
    }
    return running == n;
  }
  bool all_finished() const {
    for (const auto& a : agents) {
      if (!a->finish())
        return false;
    }
    return true;
  }
};

// Short timeouts; heartbeats relaxed unless a test is about loss.
std::map<std::string, std::string> quick_conf(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> conf = {
      {"join_timeout", "20"},       {"last_call_timeout", "0.3"},    {"close_timeout", "5"},
      {"keep_alive_interval", "2"}, {"keep_alive_max_attempt", "3"}, {"read_timeout", "10"}};
  for (auto& [k, v] : extra) {
    conf[k] = v;
  }
  return conf;
}

RendezvousConfig c10d_node(uint16_t port, const std::string& local_addr, int min_nodes,
                           int max_nodes, std::map<std::string, std::string> conf) {
  RendezvousConfig c;
  c.backend = agent::RendezvousBackend::c10d;
  c.host = "127.0.0.1";
  c.port = port;
  c.run_id = "job";
  c.settings = rendezvous::round::parse_rdzv_settings(conf);
  c.local_addr = local_addr;
  c.min_nodes = min_nodes;
  c.max_nodes = max_nodes;
  c.shape = {2, 1};
  return c;
}

RendezvousConfig client(uint16_t port, const std::string& local_addr, int min_nodes, int max_nodes,
                        std::map<std::string, std::string> extra = {}) {
  extra["is_host"] = "0";
  return c10d_node(port, local_addr, min_nodes, max_nodes, quick_conf(extra));
}

// `count` clients of one job, each on its own address (127.0.0.2, .3, ...) as on its own machine.
void add_clients(Cluster& cluster, uint16_t port, int count, int min_nodes, int max_nodes,
                 const std::map<std::string, std::string>& extra = {}) {
  for (int i = 0; i < count; ++i) {
    cluster.add(client(port, "127.0.0." + std::to_string(2 + i), min_nodes, max_nodes, extra));
  }
}

// Every agent's workers succeed; the agents all finish, with 0.
void succeed_everywhere(Cluster& cluster) {
  for (auto& a : cluster.agents) {
    a->succeed();
  }
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }));
  for (auto& a : cluster.agents) {
    CHECK(a->finish()->exit_status == 0);
  }
}

struct ExternalStore {
  std::unique_ptr<rendezvous::store::StoreServer> server = [] {
    rendezvous::store::StoreServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    return rendezvous::store::StoreServer::start(options);
  }();
  uint16_t port() const { return server->port(); }
};

void check_one_round(const std::vector<RoundInfo>& rounds, int nproc) {
  std::set<int> ranks;
  for (const auto& r : rounds) {
    CHECK(r.round == rounds[0].round);
    CHECK(r.group_world_size == static_cast<int>(rounds.size()));
    CHECK(r.world_size == nproc * static_cast<int>(rounds.size()));
    CHECK(r.base_global_rank == nproc * r.group_rank);
    CHECK(r.restart_count == rounds[0].restart_count);
    CHECK(r.master_addr == rounds[0].master_addr);
    CHECK(r.master_port == rounds[0].master_port);
    ranks.insert(r.group_rank);
  }
  CHECK(ranks.size() == rounds.size());
}

std::vector<RoundInfo> latest_rounds(const Cluster& cluster) {
  std::vector<RoundInfo> rounds;
  for (const auto& a : cluster.agents) {
    if (a->round())
      rounds.push_back(*a->round());
  }
  return rounds;
}

bool has_notice(const HeadlessAgent& a, const std::string& kind) {
  for (const auto& n : a.notices()) {
    if (n.kind == kind)
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("c10d: 3 nodes form one round, reach the workers' store, and finish together") {
  ExternalStore store;
  Cluster cluster;
  add_clients(cluster, store.port(), 3, 3, 3);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(3); }));
  const auto rounds = latest_rounds(cluster);
  check_one_round(rounds, 2);
  // Ranks follow the addresses, and rank 0 hosts a reachable workers' store.
  CHECK(cluster.agents[0]->round()->group_rank == 0);
  rendezvous::store::StoreClientOptions options;
  options.host = rounds[0].master_addr;
  options.port = rounds[0].master_port;
  options.connect_timeout = 5s;
  auto probe = rendezvous::store::StoreClient::connect(options);
  probe->set("/probe", "1");
  CHECK(probe->get("/probe") == "1");
  succeed_everywhere(cluster);
}

TEST_CASE("c10d: MIN:MAX closes after the last call with the nodes present") {
  ExternalStore store;
  Cluster cluster;
  add_clients(cluster, store.port(), 2, 2, 4);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  check_one_round(latest_rounds(cluster), 2);
}

TEST_CASE("c10d: a crashed node is declared lost; the others re-form without it, no restart") {
  ExternalStore store;
  Cluster cluster;
  const std::map<std::string, std::string> fast = {{"keep_alive_interval", "0.3"},
                                                   {"keep_alive_max_attempt", "2"}};
  add_clients(cluster, store.port(), 3, 2, 3, fast);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(3); }));
  const int restarts = cluster.agents[0]->round()->restart_count;
  cluster.agents[2]->crash();
  cluster.agents.pop_back();
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2, 2); }));
  check_one_round(latest_rounds(cluster), 2);
  CHECK(cluster.agents[0]->round()->restart_count == restarts);
  CHECK(
      (has_notice(*cluster.agents[0], "node_lost") || has_notice(*cluster.agents[1], "node_lost")));
}

TEST_CASE("c10d: a node stopped by a signal leaves; the others re-form at once") {
  ExternalStore store;
  Cluster cluster;
  add_clients(cluster, store.port(), 3, 2, 3);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(3); }));
  cluster.agents[1]->signal(SIGTERM);
  REQUIRE(cluster.run_until([&] { return cluster.agents[1]->finish().has_value(); }));
  CHECK(cluster.agents[1]->finish()->exit_status == 128 + SIGTERM);
  // Re-formed by the leave itself, long before a heartbeat (2 s x 3) could notice.
  REQUIRE(cluster.run_until([&] {
    return cluster.agents[0]->rounds().size() == 2 && cluster.agents[2]->rounds().size() == 2 &&
           cluster.agents[0]->running() && cluster.agents[2]->running();
  }));
  CHECK(cluster.agents[0]->round()->group_world_size == 2);
}

TEST_CASE("c10d: a failure restarts every node once; the next exhausts max_restarts") {
  ExternalStore store;
  Cluster cluster;
  add_clients(cluster, store.port(), 2, 2, 2);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  cluster.agents[1]->fail(3);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2, 2); }));
  CHECK(cluster.agents[0]->round()->restart_count == 1);
  CHECK(cluster.agents[1]->round()->restart_count == 1);
  cluster.agents[0]->fail(4);
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }));
  for (auto& a : cluster.agents) {
    REQUIRE(a->finish()->exit_status == 1);
    // Every node reads the same failures: the last round's, as torchrun's table shows them.
    REQUIRE(a->finish()->failures.size() == 1);
    CHECK(a->finish()->failures[0].exit_code == 4);
  }
}

TEST_CASE("c10d: a failure after another node finished fails the job; nobody hangs") {
  ExternalStore store;
  Cluster cluster;
  add_clients(cluster, store.port(), 2, 2, 2);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  cluster.agents[0]->succeed();
  cluster.run_until([] { return false; }, 1s);  // it waits in the exit barrier
  cluster.agents[1]->fail(5);
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }));
  CHECK(cluster.agents[0]->finish()->exit_status == 0);
  CHECK(cluster.agents[1]->finish()->exit_status == 1);
}

TEST_CASE(
    "c10d: the endpoint's agent hosts the store and leaves last; a forced host that "
    "cannot bind fails") {
  const uint16_t port = free_port("127.0.0.1");
  Cluster cluster;
  auto& host = cluster.add(c10d_node(port, "127.0.0.1", 2, 2, quick_conf()));
  REQUIRE(host.hosts_store());
  auto& other = cluster.add(client(port, "127.0.0.3", 2, 2));
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  host.succeed();
  other.succeed();
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }));
  CHECK(host.finish()->exit_status == 0);
  CHECK(other.finish()->exit_status == 0);

  // The port is taken by a store already (this test's, so its user's): an agent of the machine
  // that may host (the endpoint is on its machine, not its own address) becomes a client, and so
  // does one whose --local_addr is the endpoint (another agent of this user was first); one
  // forced to host (is_host=1) fails naming the address. (Another user's listener:
  // agent_store_squatters_test.)
  ExternalStore taken;
  Cluster second;
  auto heuristic = c10d_node(taken.port(), "127.0.0.3", 1, 1, quick_conf());
  CHECK_FALSE(second.add(heuristic).hosts_store());
  auto named = c10d_node(taken.port(), "127.0.0.1", 1, 1, quick_conf());
  CHECK_FALSE(second.add(named).hosts_store());
  const auto must_host = [&](const RendezvousConfig& config, const std::string& why) {
    try {
      HeadlessAgent failing(second.io, config);
      FAIL("a required host bound a taken port");
    } catch (const std::exception& error) {
      const std::string message = error.what();
      CHECK(message.find(why) != std::string::npos);
      CHECK(message.find("127.0.0.1:" + std::to_string(taken.port())) != std::string::npos);
      CHECK(message.find("does not join whatever listens there") != std::string::npos);
    }
  };
  must_host(c10d_node(taken.port(), "127.0.0.3", 1, 1, quick_conf({{"is_host", "1"}})),
            "is_host=1");
}

TEST_CASE("c10d: agents of one machine share a loopback endpoint: one binds, the others join") {
  // torchrun's rule for an endpoint on this machine whatever --local_addr says (issue: agents
  // on 127.0.0.2 and .3 with an endpoint on 127.0.0.1 used to wait out join_timeout).
  const uint16_t port = free_port("127.0.0.1");
  Cluster cluster;
  auto& a = cluster.add(c10d_node(port, "127.0.0.2", 2, 2, quick_conf()));
  auto& b = cluster.add(c10d_node(port, "127.0.0.3", 2, 2, quick_conf()));
  CHECK(a.hosts_store() != b.hosts_store());
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  check_one_round(latest_rounds(cluster), 2);
}

TEST_CASE("c10d: agents with different --nnodes fail with both values named") {
  ExternalStore store;
  Cluster cluster;
  cluster.add(client(store.port(), "127.0.0.2", 2, 2));
  cluster.add(client(store.port(), "127.0.0.3", 2, 3));
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }));
  bool named = false;
  for (auto& a : cluster.agents) {
    CHECK(a->finish()->exit_status == 1);
    const auto& reason = a->finish()->reason;
    named = named || (reason.find("--nnodes 2:3") != std::string::npos &&
                      reason.find("--nnodes 2") != std::string::npos);
  }
  CHECK(named);
}

TEST_CASE("c10d: an unreachable endpoint and too few nodes fail after join_timeout, clearly") {
  Cluster cluster;
  const uint16_t nobody = free_port("127.0.0.1");
  auto& lonely = cluster.add(client(nobody, "127.0.0.2", 1, 1, {{"join_timeout", "1"}}));
  ExternalStore store;
  auto& alone = cluster.add(client(store.port(), "127.0.0.3", 2, 2, {{"join_timeout", "1"}}));
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }));
  CHECK(lonely.finish()->exit_status == 1);
  CHECK(lonely.finish()->reason.find("127.0.0.1:" + std::to_string(nobody)) != std::string::npos);
  CHECK(alone.finish()->exit_status == 1);
  CHECK(alone.finish()->reason.find("join_timeout") != std::string::npos);
  CHECK(alone.finish()->reason.find("(1 joined)") != std::string::npos);
}

TEST_CASE("c10d: a signal while the store is still unreachable ends the agent at once") {
  Cluster cluster;
  auto& waiting = cluster.add(client(free_port("127.0.0.1"), "127.0.0.2", 1, 1));
  cluster.run_until([] { return false; }, 1s);
  waiting.signal(SIGTERM);
  REQUIRE(cluster.run_until([&] { return cluster.all_finished(); }, 2s));
  CHECK(waiting.finish()->exit_status == 128 + SIGTERM);
}

TEST_CASE("static: node ranks from --node_rank, node 0 hosts the store, restarts shared") {
  const uint16_t port = free_port("127.0.0.1");
  Cluster cluster;
  for (int rank = 1; rank >= 0; --rank) {
    RendezvousConfig c;
    c.backend = agent::RendezvousBackend::static_store;
    c.host = "127.0.0.1";
    c.port = port;
    c.node_rank = rank;
    c.min_nodes = c.max_nodes = 2;
    c.shape = {2, 1};
    c.local_addr = "127.0.0." + std::to_string(2 + rank);
    c.settings = rendezvous::round::parse_rdzv_settings(quick_conf());
    cluster.add(c);
  }
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  CHECK(cluster.agents[0]->round()->group_rank == 1);
  CHECK(cluster.agents[1]->round()->group_rank == 0);
  CHECK(cluster.agents[1]->round()->master_port == port);  // the agents' store is the workers'
  cluster.agents[0]->fail();
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2, 2); }));
  CHECK(cluster.agents[0]->round()->restart_count == 1);
  CHECK(cluster.agents[1]->round()->restart_count == 1);
}

TEST_CASE("c10d over PyTorch 1.13's TCPStore server (the old wire generation)") {
  using rendezvous::store::testing::ChildProcess;
  ChildProcess python({"/usr/bin/python3", std::string(DDPRUN_SOURCE_DIR) +
                                               "/tests/rendezvous/python/tcpstore_server.py"});
  auto line = python.read_line(60s);
  REQUIRE(line);
  const uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->find(' ') + 1)));
  REQUIRE(python.read_line(10s) == std::optional<std::string>("ready"));
  Cluster cluster;
  add_clients(cluster, port, 2, 2, 2);
  REQUIRE(cluster.run_until([&] { return cluster.all_running(2); }));
  check_one_round(latest_rounds(cluster), 2);
  succeed_everywhere(cluster);
}
