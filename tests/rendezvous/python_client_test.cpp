// Real PyTorch clients (/usr/bin/python3, torch 1.13 = G0) against ddprun-store.

#include <catch2/catch.hpp>

#include "child_process.hpp"

using ddprun::rendezvous::store::testing::ChildProcess;
using ddprun::rendezvous::store::testing::StoreDaemon;
using namespace std::chrono_literals;

namespace {
const std::string kPython = "/usr/bin/python3";
const std::string kScripts = std::string(DDPRUN_SOURCE_DIR) + "/tests/rendezvous/python/";
}  // namespace

TEST_CASE("torch.distributed.TCPStore client: every operation", "[interop]") {
  StoreDaemon store;
  ChildProcess python({kPython, kScripts + "tcpstore_ops.py", std::to_string(store.port)});
  CHECK(python.read_line(60s) == std::optional<std::string>("tcpstore_ops: all checks passed"));
  CHECK(python.exit_code(30s) == 0);
}

TEST_CASE("two gloo ranks bootstrap through ddprun-store in agent-store mode", "[interop]") {
  StoreDaemon store;
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{kPython, kScripts + "ddp_bootstrap.py"},
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
