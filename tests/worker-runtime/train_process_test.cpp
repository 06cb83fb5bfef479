// ddprun-train as real processes: exact resume after SIGKILL, SIGTERM preemption, a snapshot write
// killed half-way, bad configurations and snapshots, and what a configuration file means. Ranks
// are started with the torchrun environment; the store is hosted here, as ddprun's agent does.
#include <ATen/cpu/Utils.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "child_process.hpp"
#include "snapshot_io.hpp"
#include "temp_dir.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ddprun::test::ChildProcess;
using ddprun::test::TempDir;

namespace {

const std::string kTrainer = std::string(DDPRUN_BIN_DIR) + "/ddprun-train";

std::vector<std::string> tiny_args(std::vector<std::string> extra) {
  std::vector<std::string> args{kTrainer,
                                "data_config.block_size=16",
                                "data_config.truncate=0.25",
                                "gpt_config.n_layer=1",
                                "gpt_config.n_head=2",
                                "gpt_config.n_embd=32",
                                "trainer_config.batch_size=8",
                                "trainer_config.eval_batches=2",
                                "trainer_config.log_every=1",
                                "optimizer_config.learning_rate=0.003"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

c10::intrusive_ptr<c10d::TCPStore> host_store() {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

// Two ranks of one job, clients of the agent's store under the restart attempt's prefix.
std::vector<std::unique_ptr<ChildProcess>> start_ranks(const std::vector<std::string>& args,
                                                       const TempDir& dir, int64_t agent_port,
                                                       int attempt) {
  const int port = static_cast<int>(agent_port);
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::map<std::string, std::string> env{{"RANK", std::to_string(rank)},
                                           {"LOCAL_RANK", std::to_string(rank)},
                                           {"WORLD_SIZE", "2"},
                                           {"LOCAL_WORLD_SIZE", "2"},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", std::to_string(port)},
                                           {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
                                           {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                           {"OMP_NUM_THREADS", "1"}};
    ranks.push_back(std::make_unique<ChildProcess>(args, env, dir.path.string()));
  }
  return ranks;
}

void expect_exit(std::vector<std::unique_ptr<ChildProcess>>& ranks, int code) {
  for (auto& rank : ranks) {
    const auto status = rank->wait(120s);
    INFO(rank->output());
    REQUIRE(status.has_value());
    CHECK(*status == code);
  }
}

c10::impl::GenericDict as_dict(const c10::IValue& v) {
  return v.toGenericDict();
}
c10::IValue at(const c10::impl::GenericDict& d, const std::string& key) {
  return d.at(c10::IValue(key));
}

// Bit-identical model_state and optimizer_state (every tensor, every step count).
void expect_identical_snapshots(const std::string& a, const std::string& b) {
  const auto fa = ddprun::train::read_snapshot_file(a);
  const auto fb = ddprun::train::read_snapshot_file(b);
  // The exact-resume records match too (same position, world size, seed and model).
  CHECK(fa.resume_record == fb.resume_record);
  const auto sa = as_dict(fa.content);
  const auto sb = as_dict(fb.content);
  CHECK(at(sa, "finished_epoch").toInt() == at(sb, "finished_epoch").toInt());
  const auto ma = as_dict(at(sa, "model_state"));
  const auto mb = as_dict(at(sb, "model_state"));
  REQUIRE(ma.size() == mb.size());
  for (const auto& entry : ma) {
    INFO(entry.key().toStringRef());
    CHECK(torch::equal(entry.value().toTensor(), mb.at(entry.key()).toTensor()));
  }
  const auto oa = as_dict(at(as_dict(at(sa, "optimizer_state")), "state"));
  const auto ob = as_dict(at(as_dict(at(sb, "optimizer_state")), "state"));
  REQUIRE(oa.size() == ob.size());
  for (const auto& entry : oa) {
    const auto xa = as_dict(entry.value());
    const auto xb = as_dict(ob.at(entry.key()));
    for (const char* key : {"step", "exp_avg", "exp_avg_sq"}) {
      CHECK(torch::equal(at(xa, key).toTensor(), at(xb, key).toTensor()));
    }
  }
}

int64_t finished_epoch(const std::string& path) {
  return at(as_dict(ddprun::train::read_snapshot_file(path).content), "finished_epoch").toInt();
}

// The decay group's learning rate in a snapshot's optimizer_state.
double learning_rate(const std::string& path) {
  const auto content = as_dict(ddprun::train::read_snapshot_file(path).content);
  const auto groups = at(as_dict(at(content, "optimizer_state")), "param_groups").toListRef();
  return at(as_dict(groups[0]), "lr").toDouble();
}

}  // namespace

TEST_CASE("a job killed with SIGKILL resumes from its snapshot to bit-identical weights",
          "[resume]") {
  const auto args = tiny_args({"trainer_config.max_epochs=3", "trainer_config.steps_per_epoch=6"});
  // The test hosts the store on a port the kernel picks: a port chosen here and bound later by
  // rank 0 can be taken in between by any other process (CI runs tests in parallel). Rank 0
  // hosting the store is covered under torchrun in train_python_test.
  auto store = host_store();
  TempDir straight("straight");
  {
    auto ranks = start_ranks(args, straight, store->getPort(), 0);
    expect_exit(ranks, 0);
  }
  TempDir killed("killed");
  {
    auto ranks = start_ranks(args, killed, store->getPort(), 1);
    REQUIRE(ranks[0]->wait_for_output("snapshot: wrote snapshot.pt (finished epoch 1)", 120s));
    for (auto& rank : ranks) {
      rank->signal(SIGKILL);
    }
    expect_exit(ranks, 128 + SIGKILL);
  }
  CHECK(finished_epoch(killed.file("snapshot.pt")) >= 1);
  {
    auto ranks = start_ranks(args, killed, store->getPort(), 2);  // the agent's restart
    REQUIRE(ranks[0]->wait_for_output("resumed from snapshot.pt", 120s));
    expect_exit(ranks, 0);
  }
  expect_identical_snapshots(straight.file("snapshot.pt"), killed.file("snapshot.pt"));
}

TEST_CASE("SIGTERM: the step finishes, rank 0 snapshots, exit 143, and the resume is exact",
          "[preemption]") {
  const auto args = tiny_args({"trainer_config.max_epochs=1", "trainer_config.steps_per_epoch=30"});
  auto store = host_store();
  TempDir straight("term-straight");
  {
    auto ranks = start_ranks(args, straight, store->getPort(), 0);
    expect_exit(ranks, 0);
  }
  TempDir stopped("term-stopped");
  {
    auto ranks = start_ranks(args, stopped, store->getPort(), 1);
    REQUIRE(ranks[0]->wait_for_output("iter 3/30", 120s));
    for (auto& rank : ranks) {
      rank->signal(SIGTERM);
    }
    expect_exit(ranks, 143);
    CHECK_THAT(ranks[0]->output(), Contains("preempted") && Contains("steps into the next"));
  }
  CHECK(finished_epoch(stopped.file("snapshot.pt")) == 0);
  {
    auto ranks = start_ranks(args, stopped, store->getPort(), 2);
    REQUIRE(ranks[0]->wait_for_output("resumed from snapshot.pt: finished epoch 0", 120s));
    expect_exit(ranks, 0);
  }
  expect_identical_snapshots(straight.file("snapshot.pt"), stopped.file("snapshot.pt"));
}

TEST_CASE("a process killed while writing its snapshot leaves the previous one loadable",
          "[snapshot]") {
  TempDir dir("interrupted");
  // Wide enough that the snapshot (about 40 MB) takes a while to write and fsync.
  const auto args = tiny_args({"gpt_config.n_layer=4", "gpt_config.n_embd=256",
                               "trainer_config.steps_per_epoch=1", "trainer_config.batch_size=2",
                               "trainer_config.eval_batches=1"});
  const std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  {
    auto first = args;
    first.push_back("trainer_config.max_epochs=1");
    ChildProcess run(first, env, dir.path.string());
    REQUIRE(run.wait(120s) == 0);
  }
  REQUIRE(finished_epoch(dir.file("snapshot.pt")) == 1);

  // The second run may write 4 MiB to a file: its epoch-2 snapshot (about 40 MB) stops there
  // with SIGXFSZ, which kills it in the middle of the write, every time.
  auto second = args;
  second.push_back("trainer_config.max_epochs=2");
  auto limited = std::vector<std::string>{"/usr/bin/prlimit", "--fsize=4194304", "--"};
  limited.insert(limited.end(), second.begin(), second.end());
  ChildProcess run(limited, env, dir.path.string());
  CHECK(run.wait(120s) == 128 + SIGXFSZ);
  // The old snapshot is whole: epoch 2's write was cut short before its rename.
  CHECK(finished_epoch(dir.file("snapshot.pt")) == 1);
  ChildProcess again(second, env, dir.path.string());
  CHECK(again.wait(120s) == 0);
  CHECK_THAT(again.output(), Contains("resumed from snapshot.pt"));
}

TEST_CASE("use_amp and precision on this CPU: what runs is said, what cannot is refused",
          "[config][precision]") {
  TempDir dir("precision");
  const auto capabilities = at::cpu::get_cpu_capabilities();
  const auto has = [&](const char* name) {
    const auto it = capabilities.find(name);
    return it != capabilities.end() && it->second.toBool();
  };
  const bool native_bf16 = has("avx512_bf16") || has("amx_bf16");
  const bool native_fp16 = has("avx512_fp16") || has("amx_fp16");
  ChildProcess amp(tiny_args({"trainer_config.use_amp=true", "trainer_config.max_epochs=1",
                              "trainer_config.steps_per_epoch=2"}),
                   {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
  REQUIRE(amp.wait(120s) == 0);
  CHECK_THAT(amp.output(),
             Contains(native_bf16 ? "precision bf16 (use_amp on this CPU, which has native bf16)"
                                  : "precision fp32 (use_amp, but this CPU has no native bf16"));
  std::filesystem::remove(dir.file("snapshot.pt"));
  ChildProcess fp16(tiny_args({"trainer_config.precision=fp16", "trainer_config.max_epochs=1",
                               "trainer_config.steps_per_epoch=2"}),
                    {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
  const auto status = fp16.wait(120s);
  INFO(fp16.output());
  if (native_fp16) {
    CHECK(status == 0);
    CHECK_THAT(fp16.output(), Contains("precision fp16 (trainer_config.precision=fp16, with loss "
                                       "scaling)"));
  } else {
    CHECK(status == 2);
    CHECK_THAT(fp16.output(), Contains("trainer_config.precision=fp16 cannot run on this CPU: it "
                                       "has no native fp16"));
    CHECK_FALSE(std::filesystem::exists(dir.file("snapshot.pt")));
  }
}

TEST_CASE("ddprun checks train's configuration once, before any rendezvous", "[config]") {
  TempDir dir("check");
  ChildProcess run({std::string(DDPRUN_BIN_DIR) + "/ddprun", "--standalone", "--nproc_per_node",
                    "1", "--max_restarts", "2", "train", "trainer_config.max_epochs=abc"},
                   {}, dir.path.string());
  CHECK(run.wait(60s) == 2);
  const std::string output = run.output();
  INFO(output);
  const std::string problem = "'trainer_config.max_epochs' must be an integer, got 'abc'";
  const auto first = output.find(problem);
  REQUIRE(first != std::string::npos);
  CHECK(output.find(problem, first + 1) == std::string::npos);  // said once, not per restart
  CHECK_THAT(output, Contains("ddprun: error: train: the trainer's configuration is invalid "
                              "(above); nothing was started"));
  CHECK(output.find("joining rendezvous") == std::string::npos);
  CHECK(output.find("failed") == std::string::npos);  // no failure table: no worker ran
  // A good configuration passes the check and trains (one tiny epoch).
  auto good = tiny_args({"trainer_config.max_epochs=1", "trainer_config.sample_tokens=0"});
  good.erase(good.begin());
  std::vector<std::string> argv{std::string(DDPRUN_BIN_DIR) + "/ddprun", "--standalone",
                                "--nproc_per_node", "1", "train"};
  argv.insert(argv.end(), good.begin(), good.end());
  ChildProcess trained(argv, {}, dir.path.string());
  INFO(trained.output());
  CHECK(trained.wait(120s) == 0);
}

TEST_CASE("bad configurations and snapshots give a clear error and a non-zero exit", "[config]") {
  TempDir dir("bad");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  std::ofstream(dir.file("tiny.txt")) << "too short";
  std::ofstream(dir.file("bad.yaml")) << "trainer_config:\n  max_epochs: [1]\n";
  const std::vector<Case> cases{
      {{kTrainer, "trainer_config.max_epoch=2"},
       2,
       "unknown configuration key 'trainer_config.max_epoch'"},
      {{kTrainer, "gpt_config.n_layer=two"}, 2, "'gpt_config.n_layer' must be an integer"},
      {{kTrainer, "bad.yaml"},
       2,
       "bad.yaml: configuration key 'trainer_config.max_epochs' must be an integer"},
      {{kTrainer, "missing.yaml"},
       2,
       "configuration file missing.yaml cannot be read: no such file"},
      {{kTrainer, "data_config.path=nowhere.txt"},
       2,
       "data_config.path nowhere.txt cannot be read"},
      {{kTrainer, "data_config.path=tiny.txt"}, 2, "tiny.txt: 9 characters"},
      {{kTrainer, "gpt_config.n_embd=30", "gpt_config.n_head=4"},
       2,
       "must be divisible by gpt_config.n_head"},
      {{kTrainer, "--bogus"}, 2, "unknown option --bogus"},
      {{kTrainer, "trainer_config.precision=fp8"},
       2,
       "'trainer_config.precision' must be one of auto, fp32, tf32, bf16, fp16, got 'fp8'"},
      {tiny_args({"trainer_config.precision=tf32"}), 2,
       "trainer_config.precision=tf32 cannot run on this CPU: TF32 is a tensor-core mode"},
  };
  for (const auto& c : cases) {
    ChildProcess run(c.args, {}, dir.path.string());
    const auto status = run.wait(60s);
    INFO(c.args.back() << ": " << run.output());
    CHECK(status == c.code);
    CHECK_THAT(run.output(), Contains(c.message));
  }
  std::ofstream(dir.file("snapshot.pt")) << "PK\x03\x04 definitely not a whole zip";
  ChildProcess corrupt(tiny_args({}), {}, dir.path.string());
  CHECK(corrupt.wait(60s) == 1);
  CHECK_THAT(corrupt.output(),
             Contains("snapshot snapshot.pt: the zip archive has no end record (the file was cut "
                      "short)"));
}

TEST_CASE(
    "a configuration file means its keys over minGPT-ddp's defaults; none, the default preset",
    "[config]") {
  TempDir dir("config");
  const std::string corpus =
      std::string(DDPRUN_SOURCE_DIR) + "/worker-runtime/data/default_corpus.txt";
  const std::vector<std::string> shape{"data_config.path=" + corpus, "data_config.block_size=16",
                                       "data_config.truncate=0.25",  "gpt_config.n_layer=1",
                                       "gpt_config.n_head=2",        "gpt_config.n_embd=32",
                                       "trainer_config.max_epochs=1"};
  // A file that leaves out steps_per_epoch, eval_batches and the optimizer: full passes over the
  // 10787 training samples (11 steps of 1024) and lr 3e-4, as minGPT-ddp; not the default preset's
  // 75 steps and 3e-3.
  std::ofstream(dir.file("partial.yaml")) << "trainer_config:\n  batch_size: 1024\n"
                                          << "  snapshot_path: from_file.pt\n";
  auto with_file = shape;
  with_file.insert(with_file.begin(), {kTrainer, "partial.yaml"});
  ChildProcess file_run(with_file, {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
  REQUIRE(file_run.wait(120s) == 0);
  CHECK_THAT(file_run.output(), Contains("11 steps per epoch of 1024 per rank"));
  CHECK(learning_rate(dir.file("from_file.pt")) == Approx(3e-4));

  // Without a file: the default preset (75 steps per epoch, lr 3e-3), overrides on top.
  auto without_file = shape;
  without_file.insert(without_file.begin(), kTrainer);
  ChildProcess preset_run(without_file, {{"OMP_NUM_THREADS", "1"}}, dir.path.string());
  REQUIRE(preset_run.wait(120s) == 0);
  CHECK_THAT(preset_run.output(), Contains("75 steps per epoch of 32 per rank"));
  CHECK(learning_rate(dir.file("snapshot.pt")) == Approx(3e-3));
}
