// Interop with PyTorch: ddprun-train runs as the worker of the reference torchrun (PyTorch 1.13's
// c10d contract: rank 0 hosts the store on MASTER_PORT, 2 ranks), and the snapshot it writes loads
// in Python with torch.load, strict load_state_dict into the PyTorch minGPT module and
// AdamW.load_state_dict, and training continues.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ddprun::test::ChildProcess;

TEST_CASE("snapshots written under torchrun load in PyTorch with strict=True", "[python]") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddprun-train-python-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string source = DDPRUN_SOURCE_DIR;
  const std::string torchrun = source + "/../shared/tools/torchrun_ref.py";
  if (!std::filesystem::exists(torchrun)) {
    FAIL("the reference torchrun is missing: " << torchrun);
  }
  {
    ChildProcess run(
        {"/usr/bin/python3", torchrun, "--standalone", "--nproc_per_node", "2", "--no_python",
         std::string(DDPRUN_BIN_DIR) + "/ddprun-train", "data_config.block_size=16",
         "data_config.truncate=0.25", "gpt_config.n_layer=2", "gpt_config.n_head=2",
         "gpt_config.n_embd=32", "trainer_config.batch_size=8", "trainer_config.steps_per_epoch=3",
         "trainer_config.max_epochs=2", "trainer_config.eval_batches=1", "--metrics",
         "metrics.jsonl"},
        {{"OMP_NUM_THREADS", "1"}}, dir.string());
    const auto status = run.wait(180s);
    INFO(run.output());
    REQUIRE(status == 0);
    CHECK_THAT(run.output(), Contains("epoch 2/2 done"));
  }
  CHECK(std::filesystem::exists(dir / "metrics.jsonl"));
  ChildProcess check({"/usr/bin/python3", source + "/tests/worker-runtime/check_snapshot.py",
                      (dir / "snapshot.pt").string(), "2", "2", "32"},
                     {{"PYTHONPATH", source + "/tests/worker-runtime"}}, dir.string());
  const auto status = check.wait(120s);
  INFO(check.output());
  CHECK(status == 0);
  CHECK_THAT(check.output(), Contains("OK finished_epoch=2") && Contains("steps=[6.0]"));
  std::filesystem::remove_all(dir);
}
