// Corrupt records end to end: two real ddprun agents (--nnodes 2, c10d, the store hosted by
// one of them) run a worker group (a shell stand-in, or in builds with LibTorch the bundled
// trainer); a hostile client on a raw socket (not an agent: it speaks
// the store protocol itself) writes junk into every rendezvous key of the running round.
// Both agents must stop within seconds with exit status 1 and a message naming a corrupt
// key, never "lost the connection", and nothing may crash. With a job secret the same junk,
// through every opcode, is refused at the store: the job finishes and its snapshots are intact.

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "e2e_support.hpp"
#include "rendezvous/backends/store_kv/store_kv_requests.hpp"
#include "rendezvous/round/round_keys.hpp"
#include "tests/rendezvous/raw_connection.hpp"
#include "tests/slurm/training_job.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;
using ddprun::rendezvous::backends::StoreKvRequests;
using ddprun::rendezvous::round::RoundKeys;
using ddprun::rendezvous::store::WireGeneration;
using ddprun::rendezvous::store::testing::RawConnection;

namespace {

const std::string kRunId = "corrupt";

// The workers ignore SIGTERM, so each agent holds them (and the store's host keeps its store
// up) for --shutdown_timeout before SIGKILL: both agents read the junk before the store can go
// away with its host, whatever the order in which they notice it.
const std::string kSleepingWorker = "trap '' TERM; echo $$ > \"$DIR/pid-$RANK\"; exec sleep 60";
// A training stand-in: runs until the test says go, then writes its snapshot and succeeds.
const std::string kSnapshottingWorker =
    "echo $$ > \"$DIR/pid-$RANK\"; while [ ! -e \"$DIR/go\" ]; do sleep 0.05; done; "
    "echo \"snapshot of rank $RANK, world $WORLD_SIZE\" > \"$DIR/snapshot-$RANK.tmp\" && "
    "mv \"$DIR/snapshot-$RANK.tmp\" \"$DIR/snapshot-$RANK\"";
const std::string kSecret = "hostile-test-secret-0123456789";

// The workers: a shell script (a stand-in) or the bundled trainer with its arguments.
std::vector<std::string> shell_worker(const std::string& script) {
  return {"--no_python", "/bin/sh", "-c", script};
}

std::vector<std::string> agent_argv(uint16_t port, int node,
                                    const std::vector<std::string>& workers) {
  std::vector<std::string> argv = two_node_c10d_agent(port, node, kRunId, 2);
  argv.insert(argv.end(), {"--shutdown_timeout", "3"});
  argv.insert(argv.end(), workers.begin(), workers.end());
  return argv;
}

// A client that is no agent: it opens the store like any TCPStore client (VALIDATE, PING) and
// writes whatever it likes.
class HostileClient {
 public:
  explicit HostileClient(uint16_t port) : connection_(port, "127.0.0.2") {
    connection_.send(StoreKvRequests::validate_and_ping(7));
    REQUIRE(connection_.receive(4).size() == 4);
  }
  // ADD, whose i64 reply is read (the counters must hold integers for the server to take it).
  void add(const std::string& key, int64_t delta) {
    connection_.send(requests_.add(key, delta));
    connection_.receive(8);
  }
  // SETs, confirmed applied by a fence behind them.
  void set(const std::vector<std::pair<std::string, std::string>>& writes) {
    std::string batch;
    for (const auto& [key, value] : writes) {
      batch += requests_.set(key, value);
    }
    connection_.send(batch + requests_.fence());
    connection_.receive(1);
  }

 private:
  RawConnection connection_;
  StoreKvRequests requests_{WireGeneration::g2};
};

// Two agents whose workers run, then junk, then the checks every hostile run shares.
class RunningJob {
 public:
  explicit RunningJob(const std::string& worker = kSleepingWorker, std::string secret = "")
      : secret_(std::move(secret)),
        host_(agent_argv(port_, 2, shell_worker(worker)), dir_ / "agent-2", env()),
        other_(agent_argv(port_, 3, shell_worker(worker)), dir_ / "agent-3", env()) {
    for (int rank = 0; rank < 4; ++rank) {
      INFO(host_.output() + other_.output());
      REQUIRE(wait_for_file(
          dir_ / ("pid-" + std::to_string(rank)),
          [](const std::string& text) { return text.ends_with("\n"); }, 60s));
    }
  }

  uint16_t port() const { return port_; }
  const TempDir& dir() const { return dir_; }
  Process& host() { return host_; }
  Process& other() { return other_; }

  // Both agents exit 1 (no signal), each naming a corrupt key, never "lost the connection";
  // their workers are gone. Returns the host agent's output.
  std::string check_both_stop_naming_a_corrupt_key() {
    const auto host_status = host_.wait_exit(60s);
    const auto other_status = other_.wait_exit(60s);
    const std::string host_output = host_.output();
    const std::string other_output = other_.output();
    INFO("host agent:\n" << host_output << "\nother agent:\n" << other_output);
    CHECK(host_status == 1);
    CHECK(other_status == 1);
    for (const std::string& output : {host_output, other_output}) {
      CHECK_THAT(output, Catch::Contains("rendezvous failed: rendezvous 'corrupt': the key "
                                         "'ddprun/rdzv/corrupt/") &&
                             Catch::Contains("' is corrupt: ") &&
                             Catch::Contains("another process wrote into this rendezvous"));
      CHECK_THAT(output, !Catch::Contains("lost the connection") &&
                             !Catch::Contains("terminate called") && !Catch::Contains("Sanitizer"));
    }
    std::vector<pid_t> workers;
    for (int rank = 0; rank < 4; ++rank) {
      workers.push_back(std::stoi(read_file(dir_ / ("pid-" + std::to_string(rank)))));
    }
    CHECK(wait_until_gone(workers, 10s));
    return host_output;
  }

 private:
  std::map<std::string, std::string> env() const {
    std::map<std::string, std::string> env = {{"DIR", dir_.path()}};
    if (!secret_.empty())
      env["DDPRUN_RDZV_SECRET"] = secret_;
    return env;
  }

  std::string secret_;
  TempDir dir_;
  uint16_t port_ = free_port("127.0.0.2");
  Process host_;
  Process other_;
};

// With a job secret: every opcode that names a key, with junk, multi-MiB values and counters
// near overflow, into every agent key of round 0, each on a connection of its own, which the
// store must close at that request. PyTorch's own keys stay open to everyone.
void refuse_every_attack(uint16_t port) {
  const RoundKeys keys(kRunId);
  const uint64_t r = 0;
  const std::string four_mib(std::size_t{4} << 20, 'x');
  std::vector<std::string> targets = {
      keys.config(),          keys.round(),     keys.restarts(),     keys.job_closed(),
      keys.joined(r),         keys.expected(r), keys.close_claim(r), keys.closed(r),
      keys.master(r),         keys.waiting(r),  keys.lost(r),        keys.fail_claim(r),
      keys.failed(r),         keys.reform(r),   keys.exit_count(r),  keys.left(r),
      keys.stacks_requests(r)};
  for (int slot = 1; slot <= 2; ++slot) {
    for (const auto& key : {keys.node(r, slot), keys.assignment(r, slot), keys.wake(r, slot),
                            keys.heartbeat(r, slot)})
      targets.push_back(key);
  }
  const StoreKvRequests requests{WireGeneration::g2};
  const int64_t int64_max = std::numeric_limits<int64_t>::max();
  // Every opcode that names a key, with junk, multi-MiB values and counters near overflow:
  // each on a connection of its own, which the store must close at that request.
  const std::vector<std::function<std::string(const std::string&)>> attacks = {
      [&](const std::string& key) { return requests.set(key, "\xff\xfe"); },
      [&](const std::string& key) { return requests.set(key, four_mib); },
      [&](const std::string& key) { return requests.add(key, int64_max); },
      [&](const std::string& key) { return requests.add(key, int64_t{1} << 62); },
      [&](const std::string& key) { return requests.compare_set(key, "", "1e308"); },
      [&](const std::string& key) { return requests.append(key, "{\"nodes\": 2}"); },
      [&](const std::string& key) { return requests.multi_set({key}, {""}); },
      [&](const std::string& key) { return requests.get(key); },
      [&](const std::string& key) { return requests.multi_get({key}); },
      [&](const std::string& key) { return requests.check({key}); },
      [&](const std::string& key) { return requests.wait({key}); },
  };
  int refused = 0;
  for (const auto& key : targets) {
    for (const auto& attack : attacks) {
      RawConnection hostile(port, "127.0.0.2");
      hostile.send(StoreKvRequests::validate_and_ping(7));
      REQUIRE(hostile.receive(4).size() == 4);
      INFO(key);
      bool closed = false;
      try {
        hostile.send(attack(key));
        closed = hostile.closed_within(5s);
      } catch (const ddprun::rendezvous::store::SocketBroken&) {
        closed = true;  // cut off while it was still sending
      }
      CHECK(closed);
      ++refused;
    }
  }
  CHECK(refused == static_cast<int>(targets.size() * attacks.size()));
  // PyTorch's own keys stay open to everyone, as the workers need them.
  {
    RawConnection pytorch_like(port, "127.0.0.2");
    pytorch_like.send(StoreKvRequests::validate_and_ping(9));
    REQUIRE(pytorch_like.receive(4).size() == 4);
    pytorch_like.send(requests.add("/worker_count", 1));
    CHECK(pytorch_like.receive(8).size() == 8);
  }
}

}  // namespace

TEST_CASE("junk in every key of a running round: both agents stop naming a corrupt key") {
  RunningJob job;
  const RoundKeys keys(kRunId);
  const uint64_t r = 0;
  const std::string four_mib(std::size_t{4} << 20, 'x');
  const std::string int64_max = std::to_string(std::numeric_limits<int64_t>::max());
  HostileClient hostile(job.port());
  // Counters pushed near the end of int64: still integers (the server takes the ADD), far
  // beyond any count of nodes or restarts.
  for (const auto& counter : {keys.restarts(), keys.lost(r), keys.waiting(r), keys.joined(r),
                              keys.exit_count(r), keys.left(r)}) {
    hostile.add(counter, int64_t{1} << 62);
  }
  // Every other key of the round: empty, bytes that are not text, JSON of the wrong shape,
  // 4 MiB, 1e308, and heartbeats one ADD away from overflowing. The wake-up keys come last:
  // they make the agents read the round's state at once.
  std::vector<std::pair<std::string, std::string>> junk = {
      {keys.config(), "\xff\xfe"},
      {keys.round(), "1e308"},
      {keys.expected(r), ""},
      {keys.close_claim(r), four_mib},
      {keys.closed(r), "{\"nodes\": 2}"},
      {keys.master(r), "\xff"},
      {keys.fail_claim(r), ""},
      {keys.failed(r), "1e308"},
      {keys.reform(r), four_mib},
      {keys.job_closed(), "[]"},
  };
  for (int slot = 1; slot <= 2; ++slot) {
    junk.emplace_back(keys.node(r, slot), slot == 1 ? four_mib : "[\"not\", \"a record\"]");
    junk.emplace_back(keys.assignment(r, slot), slot == 1 ? "ok 0 9 9 9 9 9 9" : "\xff\xff\xff");
    junk.emplace_back(keys.heartbeat(r, slot), int64_max);
  }
  hostile.set(junk);
  hostile.set({{keys.wake(r, 1), ""}, {keys.wake(r, 2), "\xff"}});

  job.check_both_stop_naming_a_corrupt_key();
}

TEST_CASE("counters an agent adds to hold no integer: corrupt, not a lost connection") {
  // The report: the store closes the connection of an ADD that meets a value that is
  // no integer (PyTorch's behaviour), and every op in flight on it failed with "the server
  // closed the connection". The agents must name the key instead.
  RunningJob job;
  const RoundKeys keys(kRunId);
  const uint64_t r = 0;
  HostileClient hostile(job.port());
  hostile.set({{keys.heartbeat(r, 1), "\xff\xfe"},
               {keys.heartbeat(r, 2), ""},
               {keys.lost(r), "1e308"},
               {keys.waiting(r), "{}"},
               {keys.exit_count(r), "\xff"}});
  const std::string host_output = job.check_both_stop_naming_a_corrupt_key();
  CHECK_THAT(host_output, Catch::Contains("not a counter"));
}

TEST_CASE("with a job secret, junk through every opcode is refused and the job finishes intact") {
  RunningJob job(kSnapshottingWorker, kSecret);
  refuse_every_attack(job.port());

  // The job never noticed: it finishes, every snapshot whole.
  write_file(job.dir() / "go", "");
  const auto host_status = job.host().wait_exit(60s);
  const auto other_status = job.other().wait_exit(60s);
  const std::string outputs = job.host().output() + job.other().output();
  INFO(outputs);
  CHECK(host_status == 0);
  CHECK(other_status == 0);
  CHECK_THAT(outputs, !Catch::Contains("is corrupt") && !Catch::Contains("rendezvous failed"));
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(read_file(job.dir() / ("snapshot-" + std::to_string(rank))) ==
          "snapshot of rank " + std::to_string(rank) + ", world 4\n");
  }
}

#if DDPRUN_HAS_TRAINER
TEST_CASE(
    "with a job secret, the bundled trainer trains through every attack; its snapshot loads") {
  TempDir dir;
  const uint16_t port = free_port("127.0.0.2");
  const std::string snapshot = dir / "snapshot.pt";
  // Ten short epochs with a snapshot after each: the attacks start after the first snapshot and
  // take a small part of what is left.
  std::vector<std::string> training = {"train"};
  for (auto& arg : ddprun::slurm_test::tiny_training_at(snapshot, 10, 200, 1000))
    training.push_back(arg);
  const std::map<std::string, std::string> env = {{"DDPRUN_RDZV_SECRET", kSecret},
                                                  {"OMP_NUM_THREADS", "1"}};
  Process host(agent_argv(port, 2, training), dir / "agent-2", env);
  Process other(agent_argv(port, 3, training), dir / "agent-3", env);
  {
    INFO(host.output() + other.output());
    REQUIRE(wait_for_file(snapshot, [](const std::string& text) { return !text.empty(); }, 180s));
  }
  refuse_every_attack(port);

  const auto host_status = host.wait_exit(300s);
  const auto other_status = other.wait_exit(300s);
  const std::string outputs = host.output() + other.output();
  INFO(outputs);
  CHECK(host_status == 0);
  CHECK(other_status == 0);
  CHECK_THAT(outputs, Catch::Contains("(finished epoch 10)") && !Catch::Contains("is corrupt") &&
                          !Catch::Contains("rendezvous failed") &&
                          !Catch::Contains("resumed from"));  // no worker was restarted
  // The snapshot is whole: torch.load, and strict loads of the model and AdamW state, take it.
  Process check({reference_python(),
                 std::string(DDPRUN_SOURCE_DIR) + "/tests/worker-runtime/check_snapshot.py",
                 snapshot, "1", "2", "32"},
                dir / "check-out");
  const auto check_status = check.wait_exit(120s);
  INFO(check.output());
  CHECK(check_status == 0);
  CHECK_THAT(check.output(), Catch::Contains("OK finished_epoch=10"));
}
#endif
