// Interop with PyTorch 2.x (DDPRUN_TORCH_PYTHON, the project's .venv): ddprun-train runs as the
// worker of the real torchrun, 2 ranks, in both of its store contracts: a client of torchrun's own
// store (TORCHELASTIC_USE_AGENT_STORE=True, the default since 2.x) and, with
// TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, rank 0 hosting the store on MASTER_PORT. The snapshot it
// writes loads in Python with torch.load, strict load_state_dict into the PyTorch minGPT module
// and AdamW.load_state_dict, and training continues.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ddprun::test::ChildProcess;

namespace {

const std::string kSource = DDPRUN_SOURCE_DIR;
const std::string kPython = DDPRUN_TORCH_PYTHON;

std::string reference_torchrun() {
  const auto torchrun = std::filesystem::path(kPython).parent_path() / "torchrun";
  if (!std::filesystem::exists(torchrun)) {
    FAIL("torchrun not found next to DDPRUN_TORCH_PYTHON: " << torchrun.string()
                                                            << " (run scripts/install-deps.sh)");
  }
  return torchrun.string();
}

struct TempDir {
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("ddprun-train-python-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

// Two ranks of ddprun-train under torchrun; returns its output after checking the exit status.
std::string train_under_torchrun(const TempDir& dir, const std::string& max_epochs,
                                 const std::map<std::string, std::string>& extra_env) {
  std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  env.insert(extra_env.begin(), extra_env.end());
  ChildProcess run({reference_torchrun(), "--standalone", "--nproc_per_node", "2", "--no_python",
                    std::string(DDPRUN_BIN_DIR) + "/ddprun-train", "data_config.block_size=16",
                    "data_config.truncate=0.25", "gpt_config.n_layer=2", "gpt_config.n_head=2",
                    "gpt_config.n_embd=32", "trainer_config.batch_size=8",
                    "trainer_config.steps_per_epoch=3", "trainer_config.max_epochs=" + max_epochs,
                    "trainer_config.eval_batches=1", "--metrics", "metrics.jsonl"},
                   env, dir.path.string());
  const auto status = run.wait(180s);
  INFO(run.output());
  REQUIRE(status == 0);
  CHECK_THAT(run.output(), Contains("epoch " + max_epochs + "/" + max_epochs + " done"));
  return run.output();
}

}  // namespace

TEST_CASE("under torchrun 2.x, snapshots load in PyTorch with strict=True", "[python]") {
  TempDir dir("agent-store");
  train_under_torchrun(dir, "2", {});
  CHECK(std::filesystem::exists(dir.path / "metrics.jsonl"));
  ChildProcess check({kPython, kSource + "/tests/worker-runtime/check_snapshot.py",
                      (dir.path / "snapshot.pt").string(), "2", "2", "32"},
                     {{"PYTHONPATH", kSource + "/tests/worker-runtime"}}, dir.path.string());
  const auto status = check.wait(120s);
  INFO(check.output());
  CHECK(status == 0);
  CHECK_THAT(check.output(), Contains("OK finished_epoch=2") && Contains("steps=[6.0]"));
}

TEST_CASE("under torchrun 2.x without its shared store, rank 0 hosts the store", "[python]") {
  TempDir dir("rank0-store");
  train_under_torchrun(dir, "1", {{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"}});
}
