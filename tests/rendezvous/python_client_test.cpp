// Real PyTorch clients of both protocol generations against ddprun-store: Debian's torch 1.13
// (/usr/bin/python3, G0) and the project's PyTorch 2.x (DDPRUN_TORCH_PYTHON, .venv's 2.13, G2).

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "secret_file.hpp"

using ddprun::rendezvous::store::testing::ChildProcess;
using ddprun::rendezvous::store::testing::SecretFile;
using ddprun::rendezvous::store::testing::StoreDaemon;
using namespace std::chrono_literals;

namespace {
const std::string kPythonG0 = "/usr/bin/python3";
const std::string kPythonG2 = DDPRUN_TORCH_PYTHON;
const std::string kScripts = std::string(DDPRUN_SOURCE_DIR) + "/tests/rendezvous/python/";

// Two gloo ranks of `python` bootstrap through `store` as torchrun's workers do (agent-store mode).
void bootstrap_two_gloo_ranks(const std::string& python, const StoreDaemon& store) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{python, kScripts + "ddp_bootstrap.py"},
        std::vector<std::string>{"TORCHELASTIC_USE_AGENT_STORE=True",
                                 "TORCHELASTIC_RESTART_COUNT=0", "MASTER_ADDR=127.0.0.1",
                                 "MASTER_PORT=" + std::to_string(store.port),
                                 "RANK=" + std::to_string(rank), "WORLD_SIZE=2",
                                 "LOCAL_RANK=" + std::to_string(rank), "GLOO_SOCKET_IFNAME=lo"}));
  }
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(ranks[rank]->read_line(90s) ==
          std::optional<std::string>("rank " + std::to_string(rank) + ": ok"));
    CHECK(ranks[rank]->exit_code(30s) == 0);
  }
}

// `python` runs `script`.py, which checks every TCPStore operation it makes against a fresh
// ddprun-store and says so on its last line.
void check_store_ops_script(const std::string& python, const std::string& script,
                            std::vector<std::string> daemon_args = {}) {
  StoreDaemon store(std::move(daemon_args));
  ChildProcess client({python, kScripts + script + ".py", std::to_string(store.port)});
  CHECK(client.read_line(60s) == std::optional<std::string>(script + ": all checks passed"));
  CHECK(client.exit_code(30s) == 0);
}
}  // namespace

TEST_CASE("torch 1.13 TCPStore client (G0): every operation", "[interop]") {
  check_store_ops_script(kPythonG0, "tcpstore_ops");
}

TEST_CASE("torch 2.x TCPStore client (G2): every operation, reuse after a timed-out wait",
          "[interop]") {
  check_store_ops_script(kPythonG2, "tcpstore_ops_2x");
}

TEST_CASE("two torch 1.13 gloo ranks bootstrap through ddprun-store in agent-store mode",
          "[interop]") {
  StoreDaemon store;
  bootstrap_two_gloo_ranks(kPythonG0, store);
}

TEST_CASE("two torch 2.x gloo ranks bootstrap through ddprun-store in agent-store mode",
          "[interop]") {
  StoreDaemon store;
  bootstrap_two_gloo_ranks(kPythonG2, store);
}

// A job secret guards only the agents' keys: PyTorch's clients, whose keys all begin with "/",
// need no authentication and see no difference.
TEST_CASE("torch 1.13 TCPStore client (G0): every operation against a store with a job secret",
          "[interop][job_secret]") {
  const SecretFile secret("python-client-job-secret\n", 0600);
  check_store_ops_script(kPythonG0, "tcpstore_ops", {"--secret-file", secret.path()});
}

TEST_CASE("torch 2.x TCPStore client (G2): every operation against a store with a job secret",
          "[interop][job_secret]") {
  const SecretFile secret("python-client-job-secret\n", 0600);
  check_store_ops_script(kPythonG2, "tcpstore_ops_2x", {"--secret-file", secret.path()});
}

TEST_CASE("two torch 2.x gloo ranks bootstrap through a store with a job secret",
          "[interop][job_secret]") {
  const SecretFile secret("python-client-job-secret\n", 0600);
  StoreDaemon store({"--secret-file", secret.path()});
  bootstrap_two_gloo_ranks(kPythonG2, store);
}
