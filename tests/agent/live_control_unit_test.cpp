// Live recovery's agent side, pure parts: the control file's text (which the trainer's parser
// reads, worker-runtime/live_world.hpp) and when a membership change may keep the workers.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "agent/workers/live_control.hpp"

using namespace ddprun::agent;

TEST_CASE("the control file names the round's world, or says it re-forms", "[live]") {
  RoundInfo round;
  round.round = 7;
  round.base_global_rank = 2;
  round.world_size = 6;
  round.master_addr = "node-a";
  round.master_port = 29512;
  round.restart_count = 1;
  CHECK(live_control_running(round) ==
        "ddprun-live 1\ngeneration 7\nstate running\nbase_rank 2\nworld_size 6\n"
        "master_addr node-a\nmaster_port 29512\nrestart_count 1\n");
  CHECK(live_control_reforming(7) == "ddprun-live 1\ngeneration 7\nstate reforming\n");
}

TEST_CASE("workers stay through a membership change only if every one runs and joined", "[live]") {
  CHECK(decide_live_keep({{0, true, true}, {1, true, true}}).keep);
  const auto exited = decide_live_keep({{0, true, true}, {1, false, true}});
  CHECK(!exited.keep);
  CHECK(exited.reason == "local rank 1 has exited");
  const auto not_joined = decide_live_keep({{0, true, false}});
  CHECK(!not_joined.keep);
  CHECK_THAT(not_joined.reason, Catch::Contains("local rank 0 did not join"));
  CHECK(!decide_live_keep({}).keep);
}

TEST_CASE("a worker joined when its joined file holds its own pid", "[live]") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddprun_live_control_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string control = (dir / "live_control").string();
  CHECK(!worker_joined_live(control, 0, 1234));
  std::ofstream(live_joined_path(control, 0)) << "1234\n";
  CHECK(worker_joined_live(control, 0, 1234));
  CHECK(!worker_joined_live(control, 0, 1235));  // an earlier worker of that local rank
  CHECK(!worker_joined_live(control, 1, 1234));
  write_live_control(control, live_control_reforming(3));
  std::ifstream file(control);
  std::string first;
  std::getline(file, first);
  CHECK(first == "ddprun-live 1");
  std::filesystem::remove_all(dir);
}
