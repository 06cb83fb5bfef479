// Interop with PyTorch 2.x (DDPRUN_TORCH_PYTHON, the project's .venv): ddprun-train runs as the
// worker of the real torchrun, 2 ranks, in both of its store contracts: a client of torchrun's own
// store (TORCHELASTIC_USE_AGENT_STORE=True, the default since 2.x) and, with
// TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, rank 0 hosting the store on MASTER_PORT. The snapshot it
// writes loads in Python with torch.load, strict load_state_dict into the PyTorch minGPT module
// and AdamW.load_state_dict, and training continues.
// minGPT-ddp's snapshots both ways, with that PyTorch and with Debian's 1.13 (/usr/bin/python3):
// mingpt_snapshot.py saves and loads them with the example's own code (restated), ddprun-train
// resumes the example's and the example's loader takes ddprun-train's.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "child_process.hpp"
#include "fused_adamw.hpp"
#include "loss_scaler.hpp"
#include "temp_dir.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using namespace ddprun::test;
using namespace ddprun::train;

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

// Two ranks of ddprun-train under torchrun; returns its output after checking the exit status.
std::string train_under_torchrun(const TempDir& dir, const std::string& max_epochs,
                                 const std::map<std::string, std::string>& extra_env,
                                 const std::vector<std::string>& extra_args = {}) {
  std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  env.insert(extra_env.begin(), extra_env.end());
  std::vector<std::string> args{reference_torchrun(),
                                "--standalone",
                                "--nproc_per_node",
                                "2",
                                "--no_python",
                                std::string(DDPRUN_BIN_DIR) + "/ddprun-train",
                                "data_config.block_size=16",
                                "data_config.truncate=0.25",
                                "gpt_config.n_layer=2",
                                "gpt_config.n_head=2",
                                "gpt_config.n_embd=32",
                                "trainer_config.batch_size=8",
                                "trainer_config.steps_per_epoch=3",
                                "trainer_config.max_epochs=" + max_epochs,
                                "trainer_config.eval_batches=1",
                                "--metrics",
                                "metrics.jsonl"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ChildProcess run(args, env, dir.path.string());
  const auto status = run.wait(180s);
  INFO(run.output());
  REQUIRE(status == 0);
  CHECK_THAT(run.output(), Contains("epoch " + max_epochs + "/" + max_epochs + " done"));
  return run.output();
}

}  // namespace

namespace {

// The 2-epoch, 3-step run's snapshot in PyTorch: strict load_state_dict and AdamW take it.
void check_snapshot_in_pytorch(const TempDir& dir) {
  ChildProcess check({kPython, kSource + "/tests/worker-runtime/check_snapshot.py",
                      (dir.path / "snapshot.pt").string(), "2", "2", "32"},
                     {{"PYTHONPATH", kSource + "/tests/worker-runtime"}}, dir.path.string());
  const auto status = check.wait(120s);
  INFO(check.output());
  CHECK(status == 0);
  CHECK_THAT(check.output(), Contains("OK finished_epoch=2") && Contains("steps=[6.0]"));
}

}  // namespace

TEST_CASE("under torchrun 2.x, snapshots load in PyTorch with strict=True", "[python]") {
  TempDir dir("agent-store");
  train_under_torchrun(dir, "2", {});
  CHECK(std::filesystem::exists(dir.path / "metrics.jsonl"));
  check_snapshot_in_pytorch(dir);
}

TEST_CASE("a bf16 run's snapshot is fp32 and loads in PyTorch as any other", "[python]") {
  // Mixed precision keeps master weights and optimizer state in fp32: the snapshot is the same
  // minGPT-ddp snapshot, and PyTorch's strict load and AdamW take it.
  TempDir dir("bf16");
  const auto output = train_under_torchrun(dir, "2", {}, {"trainer_config.precision=bf16"});
  CHECK_THAT(output, Contains("precision bf16 (trainer_config.precision=bf16"));
  check_snapshot_in_pytorch(dir);
}

namespace {

std::vector<float> floats_of(const nlohmann::json& values) {
  std::vector<float> out;
  for (const auto& v : values) {
    out.push_back(v.is_string() ? std::numeric_limits<float>::infinity() : v.get<float>());
  }
  return out;
}

torch::Tensor tensor_like(const nlohmann::json& values, const torch::Tensor& like) {
  return torch::tensor(floats_of(values)).view(like.sizes());
}

}  // namespace

TEST_CASE("the fp16 loss scaler skips, backs off and grows as torch.amp.GradScaler",
          "[python][precision]") {
  ChildProcess reference({kPython, kSource + "/tests/worker-runtime/grad_scaler_reference.py"}, {},
                         kSource);
  REQUIRE(reference.wait(120s) == 0);
  std::istringstream lines(reference.output());
  std::string line;
  REQUIRE(std::getline(lines, line));
  const auto initial = nlohmann::json::parse(line)["params"];
  std::vector<torch::Tensor> params{torch::tensor(floats_of(initial[0])).view({3, 4}),
                                    torch::tensor(floats_of(initial[1]))};
  for (auto& p : params) {
    p.requires_grad_(true);
  }
  FusedAdamW optimizer(
      params, torch::optim::AdamWOptions(0.01).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  LossScalerSettings settings;
  settings.growth_interval = 3;
  LossScaler scaler(torch::kCPU, settings);
  int steps = 0;
  int skipped = 0;
  while (std::getline(lines, line)) {
    const auto expected = nlohmann::json::parse(line);
    INFO("step " << steps);
    optimizer.zero_grad();
    auto loss = torch::zeros({});
    for (size_t k = 0; k < params.size(); ++k) {
      loss = loss + (params[k] * tensor_like(expected["grads"][k], params[k])).sum();
    }
    scaler.scale(loss).backward();
    std::vector<torch::Tensor> gradients{params[0].grad(), params[1].grad()};
    const auto found_inf = scaler.unscale(gradients);
    skipped += found_inf.item<float>() > 0 ? 1 : 0;
    optimizer.step_unless(found_inf);
    scaler.update(found_inf);
    CHECK(scaler.current_scale() == expected["scale"].get<double>());
    CHECK(scaler.growth_tracker() == expected["tracker"].get<int64_t>());
    for (size_t k = 0; k < params.size(); ++k) {
      CHECK(torch::allclose(params[k].detach(), tensor_like(expected["params"][k], params[k]), 0.0,
                            1e-6));
    }
    ++steps;
  }
  CHECK(steps == 12);
  CHECK(skipped == 3);
  // Skipped steps do not count: the state says 9 steps, as PyTorch's would.
  optimizer.sync_step_counts();
  const auto& state = static_cast<const torch::optim::AdamWParamState&>(
      *optimizer.state().at(params[0].unsafeGetTensorImpl()));
  CHECK(state.step() == 9);
}

TEST_CASE("under torchrun 2.x without its shared store, rank 0 hosts the store", "[python]") {
  TempDir dir("rank0-store");
  train_under_torchrun(dir, "1", {{"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"}});
}

namespace {

const std::string kDebianPython = "/usr/bin/python3";  // python3-torch 1.13 (install-deps.sh)
const std::string kCorpus = kSource + "/worker-runtime/data/default_corpus.txt";

// Runs mingpt_snapshot.py under `python`; returns its output after checking it succeeded.
std::string example_snapshot(const std::string& python, const TempDir& dir,
                             std::vector<std::string> args) {
  args.insert(args.begin(), {python, kSource + "/tests/worker-runtime/mingpt_snapshot.py"});
  ChildProcess run(args, {{"PYTHONPATH", kSource + "/tests/worker-runtime"}}, dir.path.string());
  const auto status = run.wait(120s);
  INFO(run.output());
  REQUIRE(status == 0);
  return run.output();
}

// One rank of ddprun-train, alone, on the model mingpt_snapshot.py builds (1 layer, 2 heads,
// 32 wide, block 16, a quarter of the default corpus).
ChildProcess resume_alone(const TempDir& dir, const std::string& n_embd) {
  return ChildProcess(
      {std::string(DDPRUN_BIN_DIR) + "/ddprun-train", "data_config.path=" + kCorpus,
       "data_config.block_size=16", "data_config.truncate=0.25", "gpt_config.n_layer=1",
       "gpt_config.n_head=2", "gpt_config.n_embd=" + n_embd, "trainer_config.batch_size=8",
       "trainer_config.steps_per_epoch=3", "trainer_config.eval_batches=1",
       "trainer_config.max_epochs=2", "optimizer_config.learning_rate=0.003"},
      {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
}

}  // namespace

TEST_CASE("minGPT-ddp's snapshots both ways, with PyTorch 2.x and Debian's 1.13", "[python]") {
  for (const auto& python : {kPython, kDebianPython}) {
    INFO(python);
    TempDir dir("example");
    const std::vector<std::string> shape{"--layers", "1", "--heads", "2", "--embd", "32"};
    // The example's _save_snapshot, after two AdamW steps at lr 1e-6, at finished epoch 1.
    auto save = shape;
    save.insert(save.begin(), {"save", "example.pt", "--corpus", kCorpus, "--truncate", "0.25",
                               "--block", "16", "--lr", "1e-6", "--epoch", "1"});
    example_snapshot(python, dir, save);
    std::filesystem::copy_file(dir.path / "example.pt", dir.path / "snapshot.pt");

    // ddprun-train resumes it: epoch 2 only, with the snapshot's lr (as the example would), not
    // the configuration's 0.003.
    auto run = resume_alone(dir, "32");
    const auto status = run.wait(120s);
    INFO(run.output());
    REQUIRE(status == 0);
    CHECK_THAT(run.output(), Contains("resumed from snapshot.pt: finished epoch 1") &&
                                 Contains("learning_rate 1e-06 and weight_decay 0.1 come from "
                                          "the snapshot's optimizer state") &&
                                 Contains("epoch 2/2 done"));

    // The example's _load_snapshot takes what ddprun-train wrote: three keys (Snapshot(**d)),
    // strict=True, AdamW.load_state_dict. 2 + 3 steps; lr still 1e-6; the weights moved from the
    // example's by what 3 steps at 1e-6 can do (a fresh start, or lr 0.003, moves them 100x more).
    auto load = shape;
    load.insert(load.begin(), {"load", "snapshot.pt", "--epoch", "2", "--lr", "1e-6", "--steps",
                               "5", "--compare", "example.pt", "--max-change", "1e-4"});
    CHECK_THAT(example_snapshot(python, dir, load), Contains("OK loaded snapshot.pt"));
  }
}

TEST_CASE("an example snapshot of another model shape is refused, naming file and shape",
          "[python]") {
  TempDir dir("other-shape");
  example_snapshot(
      kPython, dir,
      {"save", "snapshot.pt", "--corpus", kCorpus, "--truncate", "0.25", "--block", "16",
       "--layers", "1", "--heads", "2", "--embd", "16", "--lr", "1e-3", "--epoch", "1"});
  auto run = resume_alone(dir, "32");
  CHECK(run.wait(120s) == 1);
  CHECK_THAT(run.output(),
             Contains("snapshot snapshot.pt: it holds a model with n_layer=1, n_embd=16, "
                      "vocab_size=45, block_size=16 but this run builds n_layer=1, n_embd=32"));
}

namespace {

// A trained tiny model (1 rank, 2 epochs of 3 steps) on a quarter of the default corpus, with
// its metrics: what sampling and plotting start from.
struct TrainedRun {
  TrainedRun() : dir("trained") {
    ChildProcess run({std::string(DDPRUN_BIN_DIR) + "/ddprun-train", "data_config.path=" + kCorpus,
                      "data_config.block_size=16", "data_config.truncate=0.25",
                      "gpt_config.n_layer=1", "gpt_config.n_head=2", "gpt_config.n_embd=32",
                      "trainer_config.batch_size=8", "trainer_config.steps_per_epoch=3",
                      "trainer_config.eval_batches=1", "trainer_config.max_epochs=2",
                      "trainer_config.log_every=1", "trainer_config.sample_tokens=20",
                      "optimizer_config.learning_rate=0.01", "--metrics", "metrics.jsonl"},
                     {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
    const auto status = run.wait(120s);
    INFO(run.output());
    REQUIRE(status == 0);
    output = run.output();
  }

  // `ddprun-train sample` on this run's configuration; returns (exit status, output).
  std::pair<int, std::string> sample(const std::vector<std::string>& options) const {
    std::vector<std::string> args{std::string(DDPRUN_BIN_DIR) + "/ddprun-train",
                                  "sample",
                                  "data_config.path=" + kCorpus,
                                  "data_config.block_size=16",
                                  "data_config.truncate=0.25",
                                  "gpt_config.n_layer=1",
                                  "gpt_config.n_head=2",
                                  "gpt_config.n_embd=32"};
    args.insert(args.end(), options.begin(), options.end());
    ChildProcess run(args, {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
    const auto status = run.wait(120s);
    REQUIRE(status.has_value());
    return {*status, run.output()};
  }

  TempDir dir;
  std::string output;
};

}  // namespace

TEST_CASE("samples from a snapshot: greedy text is minGPT's generate() in PyTorch",
          "[python][sample]") {
  const TrainedRun trained;
  // The run ends with a sample of its own.
  CHECK_THAT(trained.output, Contains("sample after epoch 2 (20 tokens, temperature 0.8"));

  const std::vector<std::string> greedy{"--prompt", "The ", "--tokens", "40", "--greedy"};
  const auto [status, text] = trained.sample(greedy);
  INFO(text);
  REQUIRE(status == 0);
  CHECK(text.rfind("The ", 0) == 0);
  CHECK(text.size() > 4 + 40);                   // 40 characters, some of them multi-byte
  CHECK(trained.sample(greedy).second == text);  // greedy is deterministic

  ChildProcess reference({kPython, kSource + "/tests/worker-runtime/mingpt_generate.py",
                          (trained.dir.path / "snapshot.pt").string(), "--corpus", kCorpus,
                          "--truncate", "0.25", "--block", "16", "--layers", "1", "--heads", "2",
                          "--embd", "32", "--prompt", "The ", "--tokens", "40"},
                         {{"PYTHONPATH", kSource + "/tests/worker-runtime"}}, kSource);
  REQUIRE(reference.wait(120s) == 0);
  CHECK(reference.output() == text);

  // Sampled text follows the seed.
  const std::vector<std::string> drawn{"--prompt", "The ",          "--tokens", "60",      "--seed",
                                       "7",        "--temperature", "1.5",      "--top-k", "20"};
  const auto first = trained.sample(drawn);
  CHECK(first.first == 0);
  CHECK(trained.sample(drawn).second == first.second);
  auto other_seed = drawn;
  other_seed[5] = "8";
  CHECK(trained.sample(other_seed).second != first.second);

  // What cannot be sampled is refused with a message.
  const auto outside = trained.sample({"--prompt", "price \xe2\x82\xac"});
  CHECK(outside.first == 2);
  CHECK_THAT(outside.second, Contains("the prompt has characters the model's vocabulary") &&
                                 Contains("lacks: '\xe2\x82\xac'"));
  const auto bad_number = trained.sample({"--temperature", "0"});
  CHECK(bad_number.first == 2);
  CHECK_THAT(bad_number.second, Contains("--temperature must be a number from"));
  const auto missing = trained.sample({"--snapshot", "nowhere.pt"});
  CHECK(missing.first == 2);
  CHECK_THAT(missing.second, Contains("no snapshot at nowhere.pt"));
}

TEST_CASE("the plot script draws the metrics file's series", "[python][plot]") {
  const TrainedRun trained;
  const auto png = (trained.dir.path / "curves.png").string();
  const auto series = (trained.dir.path / "series.json").string();
  ChildProcess plot(
      {kPython, kSource + "/scripts/plot_metrics.py", (trained.dir.path / "metrics.jsonl").string(),
       "-o", png, "--series-out", series},
      {}, kSource);
  const auto status = plot.wait(120s);
  INFO(plot.output());
  REQUIRE(status == 0);
  std::ifstream picture(png, std::ios::binary);
  std::string signature(8, '\0');
  picture.read(signature.data(), 8);
  CHECK(signature == "\x89PNG\r\n\x1a\n");

  // What was drawn is what the metrics file says: every step's train loss and tokens/s, and
  // each epoch's eval loss, at the job's step.
  std::vector<double> steps, losses, speeds, epoch_steps, eval_losses;
  std::ifstream metrics(trained.dir.path / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    const auto kind = record.at("kind").get<std::string>();
    if (kind != "step" && kind != "epoch") {
      continue;  // snapshot and resume records carry no step
    }
    const double step = static_cast<double>((record.at("epoch").get<int64_t>() - 1) *
                                                record.at("iters_in_epoch").get<int64_t>() +
                                            record.at("iter").get<int64_t>());
    if (kind == "step") {
      steps.push_back(step);
      losses.push_back(record.at("train_loss").get<double>());
      speeds.push_back(record.at("tokens_per_second").get<double>());
    } else {
      epoch_steps.push_back(step);
      eval_losses.push_back(record.at("eval_loss").get<double>());
    }
  }
  CHECK(steps.size() == 6);
  CHECK(epoch_steps == std::vector<double>{3, 6});
  const auto drawn = nlohmann::json::parse(std::ifstream(series));
  const auto line_of = [&](const char* name, const char* axis) {
    return drawn.at(name).at(axis).get<std::vector<double>>();
  };
  CHECK(line_of("loss/train loss", "x") == steps);
  CHECK(line_of("loss/train loss", "y") == losses);
  CHECK(line_of("loss/eval loss", "x") == epoch_steps);
  CHECK(line_of("loss/eval loss", "y") == eval_losses);
  CHECK(line_of("speed/tokens/s", "y") == speeds);
}
