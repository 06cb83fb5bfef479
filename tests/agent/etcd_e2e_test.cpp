// End-to-end tests of --rdzv_backend etcd: real ddprun agents on 127.0.0.x, a real 3-member etcd
// cluster (Debian's etcd-server) on loopback, and the bundled trainer as the workers. What must
// hold: losing any node, the one with group rank 0 included, costs a restart from the last
// snapshot; losing one etcd member costs nothing; losing the quorum is reported and ends the job
// with the snapshot intact; bad input fails clearly and in bounded time; with etcd's
// authentication on (user and password, or client certificates), agents with the right
// credentials form the round and others are refused with a message that says why.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "e2e_support.hpp"
#include "events_file.hpp"
#include "tests/rendezvous/etcd_cluster.hpp"
#include "tests/rendezvous/secret_file.hpp"
#include "tests/rendezvous/test_certificates.hpp"
#include "tests/slurm/training_job.hpp"

using namespace ddprun::agent::e2e;
using namespace std::chrono_literals;
using ddprun::rendezvous::store::testing::SecretFile;
using ddprun::rendezvous::testing::EtcdCluster;
using nlohmann::json;

namespace {

// Loss is detected within about keep_alive_interval x keep_alive_max_attempt (the lease TTL,
// at least 2 s); read_timeout bounds how long a member without quorum may keep the agents
// waiting.
const std::string kEtcdRdzv =
    "join_timeout=60,last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,"
    "read_timeout=8";
// For a job that must ride out a leader election: the agents' leases are their heartbeats, so
// renewals that stall through an election (and the load of a CI machine) for longer than the
// lease's TTL rightly count as the node's loss, and the job re-forms. A 5 s TTL leaves room for
// that; with kEtcdRdzv's 2 s, CI once saw the re-form this test says must not happen.
const std::string kEtcdRdzvThroughElection =
    "join_timeout=60,last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=5,"
    "read_timeout=8";

// The bundled trainer is built only with LibTorch; the cases tagged [trainer] need it, and a
// build without LibTorch does not run them (tests/agent/etcd.cmake filters them out). Where
// they run, a missing trainer is a failure.
void require_trainer() {
  INFO("ddprun-train was not built beside ddprun (the [trainer] cases need it)");
  REQUIRE(fs::exists(std::string(DDPRUN_BIN_DIR) + "/ddprun-train"));
}

// A small minGPT run: each epoch about a second, a snapshot after every epoch.
std::vector<std::string> tiny_training(const TempDir& dir, const std::string& snapshot,
                                       int max_epochs) {
  return ddprun::slurm_test::tiny_training_at(dir / snapshot, max_epochs, 200, 1000);
}

EtcdCluster::Options three_members() {
  EtcdCluster::Options options;
  options.members = 3;
  return options;
}

struct EtcdJob {
  explicit EtcdJob(const EtcdCluster& cluster) : etcd(cluster) {}
  const EtcdCluster& etcd;
  TempDir dir;
  std::string nnodes = "2:3";
  std::string run_id = "etcd-e2e";
  int max_epochs = 6;
  std::string rdzv_conf = kEtcdRdzv;

  std::vector<std::string> agent_argv(int node) const {
    std::vector<std::string> argv = {ddprun_binary(),
                                     "--nnodes",
                                     nnodes,
                                     "--nproc_per_node",
                                     "1",
                                     "--rdzv_backend",
                                     "etcd",
                                     "--rdzv_endpoint",
                                     etcd.endpoints(),
                                     "--rdzv_id",
                                     run_id,
                                     "--rdzv_conf",
                                     rdzv_conf,
                                     "--local_addr",
                                     "127.0.0." + std::to_string(node),
                                     "--max_restarts",
                                     "3",
                                     "--shutdown_timeout",
                                     "3",
                                     "--events-file",
                                     events(node),
                                     "train"};
    for (auto& arg : tiny_training(dir, "snapshot.pt", max_epochs))
      argv.push_back(arg);
    return argv;
  }
  std::string events(int node) const { return dir / ("events-" + std::to_string(node)); }
  std::string output(int node) const { return dir / ("agent-" + std::to_string(node)); }
  std::unique_ptr<Process> start(int node) const {
    return std::make_unique<Process>(agent_argv(node), output(node),
                                     std::map<std::string, std::string>{{"OMP_NUM_THREADS", "1"}});
  }
  bool wait_for_snapshot(std::chrono::milliseconds limit) const {
    return wait_for_file(
        dir / "snapshot.pt", [](const std::string& text) { return !text.empty(); }, limit);
  }
  std::string all_output(const std::vector<int>& nodes) const {
    std::string text;
    for (int node : nodes)
      text += "--- agent " + std::to_string(node) + ":\n" + read_file(output(node));
    return text;
  }
};

// A TCP server on 127.0.0.1 that answers every connection with bytes that are not HTTP.
class GarbageServer {
 public:
  GarbageServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    port_ = free_port("127.0.0.1");
    sa.sin_port = htons(port_);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd_, 64) != 0)
      throw std::runtime_error("GarbageServer: cannot listen");
    thread_ = std::thread([this] { serve(); });
  }
  ~GarbageServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  GarbageServer(const GarbageServer&) = delete;
  GarbageServer& operator=(const GarbageServer&) = delete;
  uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0)
        continue;
      char request[4096];
      pollfd c{client, POLLIN, 0};
      if (::poll(&c, 1, 1000) > 0)
        (void)::read(client, request, sizeof request);
      static constexpr char kGarbage[] = "\x16\x03\x01 this is not etcd \xff\xfe\r\n\r\n";
      (void)::write(client, kGarbage, sizeof kGarbage - 1);
      ::close(client);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("etcd: SIGKILL of the agent with group rank 0 mid-training; the others resume",
          "[etcd][trainer]") {
  require_trainer();
  EtcdCluster etcd(three_members());
  EtcdJob job(etcd);
  std::vector<std::unique_ptr<Process>> agents;
  for (int node : {2, 3, 4})
    agents.push_back(job.start(node));
  const std::vector<int> nodes = {2, 3, 4};

  REQUIRE(job.wait_for_snapshot(120s));
  int head = -1;
  for (int node : nodes) {
    if (latest_group_rank(job.events(node)) == 0)
      head = node;
  }
  INFO(job.all_output(nodes));
  REQUIRE(head > 0);
  const auto head_workers = latest_worker_pids(job.events(head));
  REQUIRE(!head_workers.empty());
  // The kill lands mid-training: the head's worker (global rank 0) is still running.
  REQUIRE(process_running(head_workers.front()));
  agents[static_cast<std::size_t>(head - 2)]->signal(SIGKILL);
  REQUIRE(agents[static_cast<std::size_t>(head - 2)]->wait_exit(10s) == 128 + SIGKILL);
  // Its worker dies with it (PR_SET_PDEATHSIG); only then is the snapshot the one resumed from.
  REQUIRE(wait_until_gone(head_workers, 10s));
  fs::copy_file(job.dir / "snapshot.pt", job.dir / "resume_point.pt");

  for (int node : nodes) {
    if (node == head)
      continue;
    const auto status = agents[static_cast<std::size_t>(node - 2)]->wait_exit(180s);
    INFO(job.all_output(nodes));
    CHECK(status == 0);
    // The job re-formed without the lost node.
    const auto formed = events_named(job.events(node), "round_formed");
    REQUIRE(!formed.empty());
    CHECK(formed.back()["group_world_size"] == 2);
  }
  const std::string survivors = job.all_output(
      {nodes[0] == head ? nodes[1] : nodes[0], nodes[2] == head ? nodes[1] : nodes[2]});
  CHECK_THAT(survivors, Catch::Contains("resumed from " + (job.dir / "snapshot.pt")));
  CHECK_THAT(survivors, Catch::Contains("done: " + std::to_string(job.max_epochs) + " epochs"));

  // The final snapshot is the one a 2-rank run from the resume point gives.
  fs::copy_file(job.dir / "resume_point.pt", job.dir / "reference.pt");
  std::vector<std::string> reference_argv = {ddprun_binary(), "--standalone", "--nproc_per_node",
                                             "2", "train"};
  for (auto& arg : tiny_training(job.dir, "reference.pt", job.max_epochs))
    reference_argv.push_back(arg);
  Process reference(reference_argv, job.dir / "reference-out", {{"OMP_NUM_THREADS", "1"}});
  const auto reference_status = reference.wait_exit(180s);
  INFO(reference.output());
  REQUIRE(reference_status == 0);
  CHECK_THAT(reference.output(), Catch::Contains("resumed from"));
  CHECK(read_file(job.dir / "reference.pt") == read_file(job.dir / "snapshot.pt"));
}

TEST_CASE("etcd: one member lost costs nothing; two lost end the job clearly, snapshot intact",
          "[etcd][trainer]") {
  require_trainer();
  EtcdCluster etcd(three_members());

  SECTION("SIGKILL of the leader member during training: no restart") {
    EtcdJob job(etcd);
    job.nnodes = "2";
    job.run_id = "one-member";
    job.rdzv_conf = kEtcdRdzvThroughElection;
    std::vector<std::unique_ptr<Process>> agents;
    for (int node : {2, 3})
      agents.push_back(job.start(node));
    REQUIRE(job.wait_for_snapshot(120s));
    const int leader = etcd.leader();
    REQUIRE(leader >= 0);
    etcd.kill(leader);
    for (auto& agent : agents) {
      const auto status = agent->wait_exit(180s);
      INFO(job.all_output({2, 3}));
      CHECK(status == 0);
    }
    for (int node : {2, 3}) {
      INFO("node " << node << " events:\n" << read_file(job.events(node)));
      INFO(job.all_output({2, 3}));
      CHECK(events_named(job.events(node), "round_formed").size() == 1);
      CHECK(events_named(job.events(node), "restart").empty());
    }
  }

  SECTION("SIGKILL of two members: the agents say the quorum is lost and exit non-zero") {
    EtcdJob job(etcd);
    job.nnodes = "2";
    job.run_id = "quorum";
    job.max_epochs = 1000;  // still training when the quorum goes
    std::vector<std::unique_ptr<Process>> agents;
    for (int node : {2, 3})
      agents.push_back(job.start(node));
    REQUIRE(job.wait_for_snapshot(120s));
    etcd.kill(0);
    etcd.kill(1);
    for (auto& agent : agents) {
      // Bounded by the failover budget and read_timeout, not by join_timeout or NCCL's 30 min.
      const auto status = agent->wait_exit(90s);
      INFO(job.all_output({2, 3}));
      REQUIRE(status.has_value());
      CHECK(*status != 0);
    }
    const std::string out = job.all_output({2, 3});
    CHECK_THAT(out, Catch::Contains("etcd"));
    CHECK_THAT(out, Catch::Contains("quorum"));
    // The snapshot is whole: torch.load and a strict load of model and AdamW state accept it.
    const std::string python = reference_python();
    if (fs::exists(python)) {
      Process check(
          {python, std::string(DDPRUN_SOURCE_DIR) + "/tests/worker-runtime/check_snapshot.py",
           job.dir / "snapshot.pt", "1", "2", "32"},
          job.dir / "check-out");
      const auto status = check.wait_exit(120s);
      INFO(check.output());
      CHECK(status == 0);
    }
  }
}

TEST_CASE("etcd: bad input fails clearly and in bounded time", "[etcd]") {
  TempDir dir;
  const auto run = [&](const std::string& endpoint, const std::string& conf,
                       std::chrono::seconds limit) {
    Process agent({ddprun_binary(), "--nnodes", "1", "--rdzv_backend", "etcd", "--rdzv_endpoint",
                   endpoint, "--rdzv_id", "bad", "--rdzv_conf", conf, "--no_python", "/bin/true"},
                  dir / "out");
    const auto started = Clock::now();
    const auto status = agent.wait_exit(limit);
    return std::tuple{status, agent.output(), Clock::now() - started};
  };

  SECTION("nothing listens at the endpoint") {
    const auto [status, out, took] =
        run("127.0.0.1:" + std::to_string(free_port("127.0.0.1")), "join_timeout=4", 30s);
    INFO(out);
    REQUIRE(status == 1);
    CHECK_THAT(out, Catch::Contains("etcd"));
    CHECK_THAT(out, Catch::Contains("127.0.0.1"));
    CHECK(took < 20s);
  }
  SECTION("the endpoint answers garbage") {
    GarbageServer garbage;
    const auto [status, out, took] =
        run("127.0.0.1:" + std::to_string(garbage.port()), "join_timeout=4", 30s);
    INFO(out);
    REQUIRE(status == 1);
    CHECK_THAT(out, Catch::Contains("etcd"));
    CHECK(took < 20s);
  }
  SECTION("a prefix that is not an absolute key folder") {
    const auto [status, out, took] = run("127.0.0.1:2379", "etcd_prefix=relative/path", 10s);
    INFO(out);
    CHECK(status == 2);
    CHECK_THAT(out, Catch::Contains("etcd_prefix"));
  }
  SECTION("a bad member list and TLS keys without https") {
    auto [status, out, took] = run("127.0.0.1:2379,,127.0.0.2:2379", "join_timeout=4", 10s);
    INFO(out);
    CHECK(status == 2);
    CHECK_THAT(out, Catch::Contains("empty entry"));
    std::tie(status, out, took) = run("127.0.0.1:2379", "cacert=/nonexistent.pem", 10s);
    INFO(out);
    CHECK(status == 2);
    CHECK_THAT(out, Catch::Contains("protocol=https"));
  }
}

namespace {

// Every "<what> ... finished epoch N" number in text, in order.
std::vector<int> epochs_after(const std::string& text, const std::string& what) {
  std::vector<int> epochs;
  const std::regex pattern(what + R"([^\n]*?: finished epoch (\d+)|)" + what +
                           R"([^\n]*? \(finished epoch (\d+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    epochs.push_back(std::stoi((*it)[1].matched ? (*it)[1].str() : (*it)[2].str()));
  }
  return epochs;
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::stoi(value) : fallback;
}

// Pids of processes whose command line mentions needle (the test's own folder).
std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos && process_running(std::stoi(name)))
      found.push_back(std::stoi(name));
  }
  return found;
}

// Three agents training on a 3-member etcd; faults go to the agents (new processes replace
// the killed ones, as a scheduler would), their workers and the etcd members.
class ChaosJob {
 public:
  ChaosJob(const EtcdCluster& etcd, int max_epochs) : job_(etcd) {
    job_.nnodes = "1:3";
    job_.run_id = "chaos";
    job_.max_epochs = max_epochs;
    for (int node : kNodes)
      start(node);
  }
  const EtcdJob& job() const { return job_; }

  void start(int node) {
    auto argv = job_.agent_argv(node);
    // A new process per start: its own output and events, and restarts enough for every fault.
    const int generation = ++generations_[node];
    const std::string tag = std::to_string(node) + "-" + std::to_string(generation);
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--events-file")
        argv[i + 1] = job_.dir / ("events-" + tag);
      if (argv[i] == "--max_restarts")
        argv[i + 1] = "100";
    }
    outputs_.push_back(job_.dir / ("agent-" + tag));
    agents_[node] = std::make_unique<Process>(
        argv, outputs_.back(), std::map<std::string, std::string>{{"OMP_NUM_THREADS", "1"}});
  }
  std::string events(int node) const {
    return job_.dir /
           ("events-" + std::to_string(node) + "-" + std::to_string(generations_.at(node)));
  }
  Process& agent(int node) { return *agents_.at(node); }
  std::string all_output() const {
    std::string text;
    for (const auto& path : outputs_)
      text += "--- " + path + ":\n" + read_file(path);
    return text;
  }
  std::vector<int> written() const { return epochs_after(all_output(), "snapshot: wrote"); }
  std::vector<int> resumed() const { return epochs_after(all_output(), "resumed from"); }
  int head() const {
    for (int node : kNodes) {
      if (latest_group_rank(events(node)) == 0)
        return node;
    }
    return -1;
  }
  // Waits until text satisfies done, polling every file (any agent may print it).
  template <class Done>
  bool wait_for(Done done, std::chrono::seconds limit) const {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (done())
        return true;
      // Any agent's output may change: watch the folder's newest output, bounded.
      wait_for_file(outputs_.back(), [](const std::string&) { return false; }, 100ms);
    }
    return done();
  }

  static constexpr int kNodes[] = {2, 3, 4};

 private:
  EtcdJob job_;
  std::map<int, std::unique_ptr<Process>> agents_;
  std::map<int, int> generations_;
  std::vector<std::string> outputs_;
};

}  // namespace

TEST_CASE(
    "etcd chaos: 20 faults of workers, agents (head included) and one member; the job "
    "finishes, resuming from the last snapshot each time",
    "[etcd][chaos][trainer]") {
  require_trainer();
  // bench/chaos/run.sh runs the longer version: more faults, other seeds.
  const int kFaults = env_int("DDPRUN_CHAOS_FAULTS", 20);
  const auto seed = static_cast<std::uint32_t>(env_int("DDPRUN_CHAOS_SEED", 20261204));
  const int kMaxEpochs = 3 * kFaults + 10;
  EtcdCluster etcd(three_members());
  ChaosJob chaos(etcd, kMaxEpochs);
  std::mt19937 random(seed);  // fixed: the same faults in the same order every run
  INFO("seed " << seed << ", " << kFaults << " faults");
  // The snapshot file appears (rename) just before rank 0 prints that it wrote it: wait for the
  // line, which is what the checks below count.
  REQUIRE(chaos.wait_for([&] { return !chaos.written().empty(); }, 120s));

  enum Fault { kWorker, kAgent, kHeadAgent, kEtcdMember };
  const char* fault_names[] = {"worker", "agent", "head agent", "etcd member"};
  for (int fault = 0; fault < kFaults; ++fault) {
    const auto written_before = chaos.written();
    REQUIRE(!written_before.empty());
    const int last_snapshot = *std::max_element(written_before.begin(), written_before.end());
    INFO("fault " << fault << " after the snapshot of epoch " << last_snapshot);
    REQUIRE(last_snapshot < kMaxEpochs - 2);  // the job must still be training
    auto resumes_before = chaos.resumed();
    std::sort(resumes_before.begin(), resumes_before.end());
    const auto kind = static_cast<Fault>(random() % 4);
    INFO(fault_names[kind]);

    if (kind == kEtcdMember) {
      const int member = static_cast<int>(random() % 3);
      etcd.kill(member);
      // Nothing restarts: training goes on through the next snapshot.
      REQUIRE(chaos.wait_for([&] { return chaos.written().size() > written_before.size(); }, 120s));
      CHECK(chaos.resumed().size() == resumes_before.size());
      etcd.restart(member);
      continue;
    }
    int node = static_cast<int>(ChaosJob::kNodes[random() % 3]);
    if (kind == kHeadAgent)
      node = chaos.head();
    REQUIRE(node > 0);
    if (kind == kWorker) {
      const auto pids = latest_worker_pids(chaos.events(node));
      REQUIRE(!pids.empty());
      ::kill(pids.front(), SIGKILL);
    } else {
      chaos.agent(node).signal(SIGKILL);
      REQUIRE(chaos.agent(node).wait_exit(10s) == 128 + SIGKILL);
      chaos.start(node);
    }
    // The job re-forms and resumes from the last snapshot, not from an older one.
    REQUIRE(chaos.wait_for([&] { return chaos.resumed().size() > resumes_before.size(); }, 120s));
    if (kind != kWorker) {
      // The replacement agent is in the job (its scale-up re-form has happened).
      REQUIRE(chaos.wait_for(
          [&] { return !events_named(chaos.events(node), "workers_started").empty(); }, 120s));
    }
    REQUIRE(chaos.wait_for([&] { return chaos.written().size() > written_before.size(); }, 120s));
    // Outputs are read file by file: the new resumes are what was not there before.
    auto resumed = chaos.resumed();
    std::sort(resumed.begin(), resumed.end());
    std::vector<int> new_resumes;
    std::set_difference(resumed.begin(), resumed.end(), resumes_before.begin(),
                        resumes_before.end(), std::back_inserter(new_resumes));
    REQUIRE(!new_resumes.empty());
    for (int epoch : new_resumes) {
      CHECK(epoch >= last_snapshot);
    }
  }

  for (int node : ChaosJob::kNodes) {
    const auto status = chaos.agent(node).wait_exit(300s);
    INFO(chaos.all_output());
    CHECK(status == 0);
  }
  CHECK_THAT(chaos.all_output(),
             Catch::Contains("done: " + std::to_string(kMaxEpochs) + " epochs"));
  // Nothing is left running: no agent, no worker.
  CHECK(processes_mentioning(chaos.job().dir.path()).empty());
}

namespace {

// Two agents with no trainer: each worker prints its rank; both agents must finish with 0.
struct TinyEtcdJob {
  TinyEtcdJob(std::string etcd_endpoints, std::string conf)
      : endpoints(std::move(etcd_endpoints)), rdzv_conf(std::move(conf)) {}
  std::string endpoints;
  std::string rdzv_conf;
  std::string run_id = "auth-job";
  TempDir dir;

  std::unique_ptr<Process> start(int node, std::map<std::string, std::string> env = {}) const {
    return std::make_unique<Process>(
        std::vector<std::string>{ddprun_binary(), "--nnodes", "2", "--nproc_per_node", "1",
                                 "--rdzv_backend", "etcd", "--rdzv_endpoint", endpoints,
                                 "--rdzv_id", run_id, "--rdzv_conf", rdzv_conf, "--local_addr",
                                 "127.0.0." + std::to_string(node), "--no_python", "/bin/sh", "-c",
                                 "echo \"worker rank $RANK of $WORLD_SIZE\""},
        dir / ("agent-" + std::to_string(node)), std::move(env));
  }
  // Runs both agents to their end; their output.
  std::string run_both(const std::map<std::string, std::string>& env = {}) const {
    auto first = start(1, env);
    auto second = start(2, env);
    const auto first_status = first->wait_exit(120s);
    const auto second_status = second->wait_exit(120s);
    const std::string out = first->output() + second->output();
    INFO(out);
    CHECK(first_status == 0);
    CHECK(second_status == 0);
    CHECK_THAT(out, Catch::Contains("worker rank 0 of 2"));
    CHECK_THAT(out, Catch::Contains("worker rank 1 of 2"));
    return out;
  }
};

}  // namespace

TEST_CASE("etcd with authentication: a user and password form the round; wrong ones are refused",
          "[etcd]") {
  EtcdCluster etcd;
  // The role may write the job's etcd_prefix folder, and nothing else.
  etcd.enable_auth("ddprun-job", "correct horse", "/jobs/team-a/");
  TinyEtcdJob job{etcd.endpoints(), ""};
  const SecretFile password("correct horse\n", 0600);
  const std::string password_file = password.path();
  // The test's etcd speaks plain http on loopback: the opt-in that allows a user there.
  const std::string conf =
      "join_timeout=60,last_call_timeout=1,etcd_prefix=/jobs/team-a,user=ddprun-job,"
      "insecure_auth=1,password_file=";

  SECTION("password from a file, and from the environment") {
    job.rdzv_conf = conf + password_file;
    const std::string out = job.run_both();
    CHECK_THAT(out, !Catch::Contains("correct horse"));
    job.rdzv_conf =
        "join_timeout=60,last_call_timeout=1,etcd_prefix=/jobs/team-a,user=ddprun-job,"
        "insecure_auth=1";
    job.run_id = "auth-job-env";
    job.run_both({{"DDPRUN_ETCD_PASSWORD", "correct horse"}});
  }
  SECTION("a wrong password ends the agent with one clear error") {
    const SecretFile wrong("battery staple\n", 0600);
    job.rdzv_conf = conf + wrong.path();
    auto agent = job.start(1);
    const auto status = agent->wait_exit(60s);
    const std::string out = agent->output();
    INFO(out);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("etcd at " + etcd.endpoints() +
                                    ": authentication failed for user 'ddprun-job'"));
    CHECK_THAT(out, !Catch::Contains("battery staple"));
  }
  SECTION(
      "a password file others can read, a password on the command line, none at all, plain "
      "http without insecure_auth=1") {
    const auto check_usage = [&](const std::string& rdzv_conf, const std::string& expected) {
      job.rdzv_conf = rdzv_conf;
      auto agent = job.start(1);
      const auto status = agent->wait_exit(30s);
      INFO(agent->output());
      CHECK(status == 2);
      CHECK_THAT(agent->output(), Catch::Contains(expected));
    };
    const SecretFile readable("correct horse\n", 0644);
    check_usage(conf + readable.path(), "chmod 600");
    check_usage("user=ddprun-job,password=correct horse", "password_file");
    check_usage("user=ddprun-job,insecure_auth=1", "DDPRUN_ETCD_PASSWORD");
    check_usage("password_file=" + password_file, "needs user");
    check_usage("user=ddprun-job,password_file=" + password_file, "in clear over http");
  }
  SECTION("--print-config names the user and the file, never the password") {
    Process agent({ddprun_binary(), "--nnodes", "2", "--rdzv_backend", "etcd", "--rdzv_endpoint",
                   etcd.endpoints(), "--rdzv_conf", conf + password_file, "--print-config",
                   "--no_python", "/bin/true"},
                  job.dir / "print");
    REQUIRE(agent.wait_exit(30s) == 0);
    CHECK_THAT(agent.output(), Catch::Contains("ddprun-job"));
    CHECK_THAT(agent.output(), !Catch::Contains("correct horse"));
  }
}

TEST_CASE("etcd with client-certificate auth: certificates form the round; none is refused",
          "[etcd]") {
  ddprun::rendezvous::testing::TestCertificates certificates;
  EtcdCluster etcd(EtcdCluster::Options{
      1,
      ddprun::rendezvous::testing::EtcdClusterTls{certificates.path("server.pem"),
                                                  certificates.path("server.key"),
                                                  certificates.path("ca.pem"), true},
      30s,
      {}});
  const std::string tls = "protocol=https,cacert=" + certificates.path("ca.pem");
  TinyEtcdJob job{etcd.endpoints(), "join_timeout=60,last_call_timeout=1," + tls +
                                        ",cert=" + certificates.path("client.pem") +
                                        ",key=" + certificates.path("client.key")};
  job.run_both();

  job.rdzv_conf = "join_timeout=60," + tls;  // no client certificate
  auto agent = job.start(1);
  const auto status = agent->wait_exit(90s);
  INFO(agent->output());
  CHECK(status == 1);
  CHECK_THAT(agent->output(), Catch::Contains("etcd " + etcd.endpoints()));
  CHECK_THAT(agent->output(), Catch::Contains("TLS"));
}
