// ddprun-train as real processes: exact resume after SIGKILL, SIGTERM preemption, a snapshot write
// killed half-way, bad configurations and snapshots, and what a configuration file means. Ranks
// are started with the torchrun environment; the store is hosted here, as ddprun's agent does.
#include <ATen/cpu/Utils.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "child_process.hpp"
#include "resume_record.hpp"
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

// Where in training a snapshot was taken (its exact-resume record).
ddprun::train::TrainingPosition position_of(const std::string& path) {
  const auto file = ddprun::train::read_snapshot_file(path);
  REQUIRE(file.resume_record.has_value());
  return ddprun::train::decode_resume_record(*file.resume_record).position;
}

// Waits (bounded) until a file whose name starts with `prefix` is created in `folder`.
bool wait_for_created(int inotify_fd, const std::string& prefix,
                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  alignas(inotify_event) char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{inotify_fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (::poll(&ready, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) {
      return false;
    }
    const ssize_t n = ::read(inotify_fd, buffer, sizeof buffer);
    for (ssize_t offset = 0; offset < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      if (event->len > 0 && std::string(event->name).starts_with(prefix)) {
        return true;
      }
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  return false;
}

// Runs the 2-rank job to its end in `dir` (attempt 0): the reference an interrupted run must match.
void run_straight(const std::vector<std::string>& args, const TempDir& dir, int64_t store_port) {
  auto ranks = start_ranks(args, dir, store_port, 0);
  expect_exit(ranks, 0);
}

// Starts the 2-rank job (attempt 1) and, once rank 0 printed `when`, sends every rank `signo`;
// they must exit with `code`. Returns rank 0's output.
std::string interrupt(const std::vector<std::string>& args, const TempDir& dir, int64_t store_port,
                      const std::string& when, int signo, int code) {
  auto ranks = start_ranks(args, dir, store_port, 1);
  REQUIRE(ranks[0]->wait_for_output(when, 120s));
  for (auto& rank : ranks) {
    rank->signal(signo);
  }
  expect_exit(ranks, code);
  return ranks[0]->output();
}

// Restarts an interrupted 2-rank job (the agent's restart `attempt`), waits for rank 0's resume
// line, and checks that it ends bit-identical to the uninterrupted run in `straight`.
void resume_to_the_end(const std::vector<std::string>& args, const TempDir& interrupted,
                       const TempDir& straight, int64_t store_port, int attempt,
                       const std::string& resume_line) {
  auto ranks = start_ranks(args, interrupted, store_port, attempt);
  REQUIRE(ranks[0]->wait_for_output(resume_line, 120s));
  expect_exit(ranks, 0);
  expect_identical_snapshots(straight.file("snapshot.pt"), interrupted.file("snapshot.pt"));
}

// A model wide enough that its snapshot (about 40 MB) takes a while to write and fsync.
std::vector<std::string> wide_args(std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"gpt_config.n_layer=4", "gpt_config.n_embd=256",
                               "trainer_config.batch_size=2", "trainer_config.eval_batches=1"});
  return tiny_args(extra);
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
  run_straight(args, straight, store->getPort());
  TempDir killed("killed");
  interrupt(args, killed, store->getPort(), "snapshot: wrote snapshot.pt (finished epoch 1)",
            SIGKILL, 128 + SIGKILL);
  CHECK(finished_epoch(killed.file("snapshot.pt")) >= 1);
  resume_to_the_end(args, killed, straight, store->getPort(), 2, "resumed from snapshot.pt");
}

TEST_CASE("SIGTERM: the step finishes, rank 0 snapshots, exit 143, and the resume is exact",
          "[preemption]") {
  const auto args = tiny_args({"trainer_config.max_epochs=1", "trainer_config.steps_per_epoch=30"});
  auto store = host_store();
  TempDir straight("term-straight");
  run_straight(args, straight, store->getPort());
  TempDir stopped("term-stopped");
  CHECK_THAT(interrupt(args, stopped, store->getPort(), "iter 3/30", SIGTERM, 143),
             Contains("preempted") && Contains("steps into the next"));
  CHECK(finished_epoch(stopped.file("snapshot.pt")) == 0);
  resume_to_the_end(args, stopped, straight, store->getPort(), 2,
                    "resumed from snapshot.pt: finished epoch 0");
}

TEST_CASE("a process killed while writing its snapshot leaves the previous one loadable",
          "[snapshot]") {
  TempDir dir("interrupted");
  const auto args = wide_args({"trainer_config.steps_per_epoch=1"});
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

TEST_CASE("step snapshots: a job SIGKILLed mid-epoch resumes from the last one, bit-identical",
          "[resume][snapshot]") {
  const auto args = tiny_args({"trainer_config.max_epochs=2", "trainer_config.steps_per_epoch=30",
                               "trainer_config.save_every_steps=4"});
  auto store = host_store();
  TempDir straight("steps-straight");
  run_straight(args, straight, store->getPort());
  TempDir killed("steps-killed");
  interrupt(args, killed, store->getPort(),
            "snapshot: wrote snapshot.pt (finished epoch 0, 8 steps into the next)", SIGKILL,
            128 + SIGKILL);
  const auto at = position_of(killed.file("snapshot.pt"));
  CHECK(at.finished_epoch == 0);
  CHECK(at.steps_into_epoch >= 8);
  CHECK(at.steps_into_epoch % 4 == 0);
  resume_to_the_end(args, killed, straight, store->getPort(), 2,
                    "resumed from snapshot.pt: finished epoch 0, " +
                        std::to_string(at.steps_into_epoch) + " steps into the next");
}

TEST_CASE("a SIGKILL while a step snapshot is written in the background leaves the last one whole",
          "[snapshot]") {
  TempDir dir("background-kill");
  // A snapshot takes longer to write than a step takes: one is nearly always in flight.
  const auto args = wide_args({"trainer_config.steps_per_epoch=200", "trainer_config.max_epochs=1",
                               "trainer_config.save_every_steps=1"});
  const std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  const int watch = ::inotify_init1(IN_CLOEXEC);
  REQUIRE(watch >= 0);
  REQUIRE(::inotify_add_watch(watch, dir.path.c_str(), IN_CREATE) >= 0);
  ChildProcess run(args, env, dir.path.string());
  REQUIRE(run.wait_for_output("snapshot: wrote snapshot.pt", 120s));
  // Stopped while its temporary file exists, the writer is provably mid-write when it dies.
  bool killed_mid_write = false;
  for (int attempt = 0; attempt < 50 && !killed_mid_write; ++attempt) {
    REQUIRE(wait_for_created(watch, "snapshot.pt.tmp.", 60s));
    run.signal(SIGSTOP);
    killed_mid_write =
        std::filesystem::exists(dir.file("snapshot.pt.tmp." + std::to_string(run.pid())));
    run.signal(killed_mid_write ? SIGKILL : SIGCONT);
  }
  ::close(watch);
  REQUIRE(killed_mid_write);
  CHECK(run.wait(60s) == 128 + SIGKILL);
  const auto at = position_of(dir.file("snapshot.pt"));  // whole: it reads, CRCs and all
  CHECK(at.steps_into_epoch >= 1);

  ChildProcess again(args, env, dir.path.string());
  CHECK(again.wait(180s) == 0);
  INFO(again.output());
  CHECK_THAT(again.output(),
             Contains("resumed from snapshot.pt: finished epoch 0, " +
                      std::to_string(at.steps_into_epoch) + " steps into the next"));
  // The dead writer's temporary file was cleared away at the start.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) {
    CHECK_FALSE(entry.path().filename().string().starts_with("snapshot.pt.tmp."));
  }
}

TEST_CASE("a damaged newest snapshot falls back to the one before it, with a warning",
          "[snapshot]") {
  TempDir dir("fallback");
  const std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  const auto epochs = [&](int max_epochs) {
    return tiny_args({"trainer_config.steps_per_epoch=3",
                      "trainer_config.max_epochs=" + std::to_string(max_epochs)});
  };
  {
    ChildProcess run(epochs(2), env, dir.path.string());
    REQUIRE(run.wait(120s) == 0);
  }
  REQUIRE(finished_epoch(dir.file("snapshot.pt")) == 2);
  REQUIRE(finished_epoch(dir.file("snapshot.pt.1")) == 1);  // keep_snapshots defaults to 2
  const auto cut_short = [&](const std::string& name) {
    std::filesystem::resize_file(dir.file(name), std::filesystem::file_size(dir.file(name)) / 2);
  };
  cut_short("snapshot.pt");
  {
    ChildProcess run(epochs(3), env, dir.path.string());
    CHECK(run.wait(120s) == 0);
    INFO(run.output());
    CHECK_THAT(run.output(), Contains("warning: snapshot snapshot.pt: ") &&
                                 Contains("resuming from the one before it, snapshot.pt.1") &&
                                 Contains("resumed from snapshot.pt.1: finished epoch 1"));
  }
  CHECK(finished_epoch(dir.file("snapshot.pt")) == 3);
  // None usable: the run stops, naming each file and why.
  cut_short("snapshot.pt");
  cut_short("snapshot.pt.1");
  ChildProcess none(epochs(4), env, dir.path.string());
  CHECK(none.wait(120s) == 1);
  CHECK_THAT(none.output(),
             Contains("no usable snapshot among 2 file(s): snapshot snapshot.pt: ") &&
                 Contains("; snapshot snapshot.pt.1: "));
}

TEST_CASE("keep_snapshots keeps the newest K and deletes only its own older files", "[snapshot]") {
  TempDir dir("keep");
  for (const char* name :
       {"snapshot.pt.old", "snapshot.pt.07", "snapshot.pt.1x", "other.pt.1", "notes.txt"}) {
    std::ofstream(dir.file(name)) << "not ours";
  }
  const auto epochs = [&](int max_epochs) {
    return tiny_args({"trainer_config.steps_per_epoch=2", "trainer_config.keep_snapshots=3",
                      "trainer_config.max_epochs=" + std::to_string(max_epochs)});
  };
  const std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  {
    ChildProcess run(epochs(2), env, dir.path.string());
    REQUIRE(run.wait(120s) == 0);
  }
  // A generation left by a run with a larger keep_snapshots is ours: it goes.
  std::filesystem::copy_file(dir.file("snapshot.pt.1"), dir.file("snapshot.pt.9"));
  ChildProcess run(epochs(5), env, dir.path.string());
  REQUIRE(run.wait(120s) == 0);
  CHECK_THAT(run.output(), Contains("resumed from snapshot.pt: finished epoch 2"));
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) {
    names.insert(entry.path().filename().string());
  }
  CHECK(names == std::set<std::string>{"snapshot.pt", "snapshot.pt.1", "snapshot.pt.2",
                                       "snapshot.pt.old", "snapshot.pt.07", "snapshot.pt.1x",
                                       "other.pt.1", "notes.txt"});
  CHECK(finished_epoch(dir.file("snapshot.pt")) == 5);
  CHECK(finished_epoch(dir.file("snapshot.pt.1")) == 4);
  CHECK(finished_epoch(dir.file("snapshot.pt.2")) == 3);
}
