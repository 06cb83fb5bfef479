// Pure parts of ddprun-train: configuration, corpus, sampler, buckets, environment, atomic files,
// the resume record, CRC-32, the zip directory, the choice of precision and live recovery's
// control file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>

#include "atomic_file.hpp"
#include "bucket_plan.hpp"
#include "char_corpus.hpp"
#include "crc32.hpp"
#include "device_agreement.hpp"
#include "distributed_sampler.hpp"
#include "live_world.hpp"
#include "precision.hpp"
#include "progress_report.hpp"
#include "resume_record.hpp"
#include "run_environment.hpp"
#include "snapshot_cadence.hpp"
#include "snapshot_generations.hpp"
#include "train_config.hpp"
#include "zip_directory.hpp"

using namespace ddprun::train;
using Catch::Matchers::Contains;

TEST_CASE("minGPT-ddp's gpt2_train_cfg.yaml is read as is", "[config]") {
  const char* yaml = R"(
data_config:
  path: data/input.txt
  block_size: 128
  train_split: 0.9
  truncate: 0.05
gpt_config:
  n_layer: 8
  n_head: 8
  n_embd: 512
trainer_config:
  max_epochs: 10
  batch_size: 216
  data_loader_workers: 4
  grad_norm_clip: 1.0
  snapshot_path: gpt_snapshot.pt
  save_every: 3
  use_amp: True
optimizer_config:
  weight_decay: 0.1
  learning_rate: 0.0003
hydra:
  run:
    dir: ./
)";
  const auto c = config_from_file(yaml, "gpt2_train_cfg.yaml");
  validate(c);
  // Keys the file does not have (ours) take minGPT-ddp's behaviour: full passes, whole test split.
  CHECK(c.trainer.steps_per_epoch == 0);
  CHECK(c.trainer.eval_batches == 0);
  CHECK(c.trainer.log_every == 100);
  CHECK(c.data.path == "data/input.txt");
  CHECK(c.data.block_size == 128);
  CHECK(c.data.truncate == Approx(0.05));
  CHECK(c.gpt.n_layer == 8);
  CHECK(c.gpt.n_embd == 512);
  CHECK(c.trainer.batch_size == 216);
  CHECK(c.trainer.snapshot_path == "gpt_snapshot.pt");
  CHECK(c.trainer.save_every == 3);
  CHECK(c.trainer.use_amp);
  CHECK(c.optimizer.learning_rate == Approx(3e-4));
}

TEST_CASE("a file's omitted keys take minGPT-ddp's defaults, not the default preset", "[config]") {
  const auto c = config_from_file("trainer_config:\n  max_epochs: 2\n", "partial.yaml");
  const auto mingpt = preset("mingpt");
  CHECK(c.trainer.max_epochs == 2);
  CHECK(c.optimizer.learning_rate == mingpt.optimizer.learning_rate);
  CHECK(c.optimizer.learning_rate == Approx(3e-4));
  CHECK(c.trainer.steps_per_epoch == 0);
  CHECK(c.trainer.eval_batches == 0);
  CHECK(c.trainer.batch_size == 216);
  CHECK(c.gpt.n_layer == 8);
  CHECK(c.data.block_size == 128);
  CHECK(c.data.truncate == Approx(0.05));
  CHECK(c.trainer.snapshot_path == "gpt_snapshot.pt");
  // An empty file is minGPT-ddp's configuration; no file at all is the default preset.
  CHECK(config_from_file("", "empty.yaml").gpt.n_embd == 512);
  CHECK(preset(kPresetWithoutFile).trainer.steps_per_epoch == 75);
  CHECK(preset(kPresetWithoutFile).optimizer.learning_rate == Approx(3e-3));
}

TEST_CASE("JSON configurations and Hydra-style overrides", "[config]") {
  auto c =
      apply_document(preset("default"),
                     R"({"gpt_config": {"n_layer": 3}, "trainer_config": {"seed": 7}})", "c.json");
  CHECK(c.gpt.n_layer == 3);
  CHECK(c.trainer.seed == 7);
  c = apply_override(c, "trainer_config.max_epochs=2");
  c = apply_override(c, "gpt_config.n_layer=4");
  c = apply_override(c, "trainer_config.snapshot_path=/tmp/x y.pt");
  c = apply_override(c, "optimizer_config.learning_rate=1e-3");
  CHECK(c.trainer.max_epochs == 2);
  CHECK(c.gpt.n_layer == 4);
  CHECK(c.trainer.snapshot_path == "/tmp/x y.pt");
  CHECK(c.optimizer.learning_rate == Approx(1e-3));
  CHECK(preset("mingpt").gpt.n_embd == 512);
}

TEST_CASE("bad configurations are refused with the key named", "[config]") {
  const auto base = preset("default");
  CHECK_THROWS_WITH(apply_override(base, "trainer_config.max_epoch=3"),
                    Contains("unknown configuration key 'trainer_config.max_epoch'"));
  CHECK_THROWS_WITH(apply_override(base, "model.n_layer=3"),
                    Contains("unknown configuration section 'model'"));
  CHECK_THROWS_WITH(apply_override(base, "trainer_config.max_epochs=ten"),
                    Contains("'trainer_config.max_epochs' must be an integer"));
  CHECK_THROWS_WITH(apply_override(base, "trainer_config.max_epochs=2.5"),
                    Contains("must be an integer"));
  CHECK_THROWS_WITH(apply_override(base, "trainer_config.use_amp=maybe"),
                    Contains("must be a boolean"));
  CHECK_THROWS_WITH(apply_override(base, "max_epochs"), Contains("section.key=value"));
  CHECK_THROWS_WITH(apply_document(base, "gpt_config: [1, 2]", "f.yaml"),
                    Contains("f.yaml") && Contains("must be a mapping"));
  CHECK_THROWS_WITH(apply_document(base, "gpt_config: {n_layer: {a: 1}}", "f.yaml"),
                    Contains("'gpt_config.n_layer' must be an integer"));
  CHECK_THROWS_WITH(apply_document(base, "{unbalanced", "f.yaml"), Contains("not valid YAML"));
  CHECK_THROWS_WITH(preset("huge"), Contains("unknown preset 'huge'"));
  auto c = base;
  c.gpt.n_embd = 66;
  c.gpt.n_head = 4;
  CHECK_THROWS_WITH(validate(c),
                    Contains("n_embd (66) must be divisible by gpt_config.n_head (4)"));
  c = base;
  c.trainer.batch_size = 0;
  CHECK_THROWS_WITH(validate(c), Contains("trainer_config.batch_size"));
  c = base;
  c.data.train_split = 1.0;
  CHECK_THROWS_WITH(validate(c), Contains("train_split"));
}

TEST_CASE("character corpus: sorted vocabulary, truncation, windows", "[corpus]") {
  const auto corpus = make_char_corpus("hello world", 1.0, 4, "t");
  CHECK(corpus.vocabulary == std::vector<char32_t>{' ', 'd', 'e', 'h', 'l', 'o', 'r', 'w'});
  CHECK(corpus.tokens.size() == 11);
  CHECK(corpus.sample_count() == 7);
  CHECK(corpus.tokens[0] == 3);  // 'h'
  // truncate keeps int(n * truncate) characters and builds the vocabulary from them only.
  const auto half = make_char_corpus("abcdefgh", 0.5, 2, "t");
  CHECK(half.vocabulary.size() == 4);
  // UTF-8 is decoded to code points.
  CHECK(make_char_corpus("\xc3\xa9t\xc3\xa9!", 1.0, 2, "t").vocabulary.size() == 3);
  CHECK_THROWS_WITH(make_char_corpus("abc\xff", 1.0, 1, "bad.bin"),
                    Contains("bad.bin") && Contains("not UTF-8"));
  CHECK_THROWS_WITH(make_char_corpus("short", 1.0, 64, "tiny.txt"),
                    Contains("tiny.txt") && Contains("block_size"));
}

TEST_CASE("seeded split keeps every sample exactly once", "[corpus]") {
  std::vector<int64_t> permutation{4, 0, 3, 1, 2, 5, 9, 7, 8, 6};
  const auto split = split_samples(permutation, 0.9);
  CHECK(split.train.size() == 9);
  CHECK(split.test == std::vector<int64_t>{6});
}

TEST_CASE("DistributedSampler: padding by repetition and rank striding", "[sampler]") {
  const std::vector<int64_t> order{7, 3, 5, 1, 0};  // 5 samples, 2 ranks -> pad to 6
  CHECK(samples_per_rank(5, 2) == 3);
  CHECK(rank_positions(order, 2, 0) == std::vector<int64_t>{7, 5, 0});
  CHECK(rank_positions(order, 2, 1) == std::vector<int64_t>{3, 1, 7});
  // Padding larger than the dataset repeats the whole order (PyTorch's behaviour).
  CHECK(rank_positions({1, 2}, 5, 4) == std::vector<int64_t>{1});
  CHECK(rank_positions({1, 2}, 5, 3) == std::vector<int64_t>{2});
  CHECK(batches_per_epoch(25, 8, 0) == 4);
  CHECK(batches_per_epoch(25, 8, 2) == 2);
  CHECK_THROWS(rank_positions(order, 2, 2));
}

TEST_CASE(
    "the epoch as a cursor: rank_positions' batches in one world, every sample once "
    "across a change of world",
    "[sampler][live]") {
  std::vector<int64_t> order(103);
  std::iota(order.begin(), order.end(), 1000);
  for (const int64_t world : {1, 2, 3, 4, 7}) {
    for (const int64_t batch : {1, 4, 8}) {
      int64_t cursor = 0;
      int64_t step = 0;
      const auto steps = batches_per_epoch(samples_per_rank(103, world), batch, 0);
      CHECK(steps_left_in_epoch(103, 0, world, batch) == steps);
      for (; step_share(103, cursor, world, batch) > 0; ++step) {
        for (int64_t rank = 0; rank < world; ++rank) {
          const auto mine = rank_positions(order, world, rank);
          const auto begin = static_cast<size_t>(std::min<int64_t>(step * batch, mine.size()));
          const auto end = static_cast<size_t>(std::min<int64_t>((step + 1) * batch, mine.size()));
          CHECK(step_positions(order, cursor, world, rank, batch) ==
                std::vector<int64_t>(mine.begin() + static_cast<std::ptrdiff_t>(begin),
                                     mine.begin() + static_cast<std::ptrdiff_t>(end)));
        }
        cursor += step_share(103, cursor, world, batch) * world;
      }
      CHECK(step == steps);
    }
  }
  // 3 ranks for 2 steps, then 2, then 4: every sample is taken, none twice before the padding.
  std::multiset<int64_t> taken;
  int64_t cursor = 0;
  const std::vector<int64_t> worlds{3, 3, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4};
  for (const auto world : worlds) {
    for (int64_t rank = 0; rank < world; ++rank) {
      for (const auto k : step_positions(order, cursor, world, rank, 5)) {
        taken.insert(k);
      }
    }
    cursor += step_share(103, cursor, world, 5) * world;
  }
  CHECK(step_share(103, cursor, 4, 5) == 0);
  for (const auto k : order) {
    CHECK(taken.count(k) >= 1);
  }
  CHECK(taken.size() - 103 < 4);  // the padding of the last step only
  CHECK_THROWS(step_positions(order, 0, 2, 2, 5));
}

TEST_CASE("live recovery's control file is read strictly", "[live]") {
  const auto world = parse_live_control(
      "ddprun-live 1\ngeneration 7\nstate running\nbase_rank 2\nworld_size 6\n"
      "master_addr node-a\nmaster_port 29512\nrestart_count 1\n");
  CHECK(world.generation == 7);
  CHECK(world.running);
  CHECK(world.base_rank == 2);
  CHECK(world.world_size == 6);
  CHECK(world.master_addr == "node-a");
  CHECK(world.master_port == 29512);
  CHECK(world.restart_count == 1);
  const auto reforming = parse_live_control("ddprun-live 1\ngeneration 8\nstate reforming\n");
  CHECK(reforming.generation == 8);
  CHECK(!reforming.running);

  RunEnvironment start;
  start.local_rank = 1;
  start.rank = 1;
  start.world_size = 2;
  const auto env = environment_in(start, world);
  CHECK(env.rank == 3);
  CHECK(env.world_size == 6);
  CHECK(env.master_addr == "node-a");
  CHECK(env.restart_count == 1);
  CHECK(env.use_agent_store);
  auto small = world;
  small.world_size = 3;
  CHECK_THROWS_WITH(environment_in(start, small), Contains("outside a world of 3"));

  CHECK_THROWS_WITH(parse_live_control(""), Contains("empty"));
  CHECK_THROWS_WITH(parse_live_control("ddprun-live 2\n"), Contains("'ddprun-live 1'"));
  CHECK_THROWS_WITH(parse_live_control("ddprun-live 1\ngeneration 1\nstate paused\n"),
                    Contains("neither running nor reforming"));
  CHECK_THROWS_WITH(parse_live_control("ddprun-live 1\nstate reforming\n"),
                    Contains("no 'generation'"));
  CHECK_THROWS_WITH(
      parse_live_control("ddprun-live 1\ngeneration 1\nstate running\nbase_rank 0\n"
                         "world_size 2\nmaster_addr a\nmaster_port 70000\nrestart_count 0\n"),
      Contains("'master_port' is '70000'"));
  CHECK_THROWS_WITH(parse_live_control("ddprun-live 1\ngeneration x1\nstate reforming\n"),
                    Contains("'generation' is 'x1'"));
  CHECK_THROWS_WITH(parse_live_control("ddprun-live 1\nnospace\n"), Contains("malformed line"));
  CHECK_THROWS_WITH(parse_live_control(std::string(kMaxLiveControlBytes + 1, 'x')),
                    Contains("more than"));
}

TEST_CASE("bucket plan: reverse order, small first bucket, cap overshoot by one tensor",
          "[buckets]") {
  constexpr int64_t MiB = 1 << 20;
  // Parameters 0..4; the walk starts at 4.
  const auto buckets = plan_buckets({10 * MiB, 20 * MiB, 5 * MiB, MiB / 2, MiB / 2});
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0] == std::vector<size_t>{4, 3});  // reaches 1 MiB
  CHECK(buckets[1] == std::vector<size_t>{2, 1});  // 25 MiB reached with the 20 MiB tensor
  CHECK(buckets[2] == std::vector<size_t>{0});
  CHECK(plan_buckets({100, 100}).size() == 1);
}

TEST_CASE("the torchrun worker environment", "[environment]") {
  std::map<std::string, std::string> vars{{"RANK", "1"},
                                          {"WORLD_SIZE", "2"},
                                          {"LOCAL_RANK", "1"},
                                          {"MASTER_ADDR", "127.0.0.1"},
                                          {"MASTER_PORT", "29511"},
                                          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                          {"TORCHELASTIC_RESTART_COUNT", "3"}};
  auto lookup = [&](const std::string& n) -> std::optional<std::string> {
    const auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const auto env = read_run_environment(lookup);
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  CHECK(env.master_port == 29511);
  CHECK(env.use_agent_store);
  CHECK(agent_store_prefix(env) == "/worker/attempt_3");
  vars["RANK"] = "2";
  CHECK_THROWS_WITH(read_run_environment(lookup), Contains("RANK='2'"));
  vars["RANK"] = "1";
  vars["MASTER_PORT"] = "http";
  CHECK_THROWS_WITH(read_run_environment(lookup), Contains("MASTER_PORT"));
  const auto alone = read_run_environment([](const std::string&) { return std::nullopt; });
  CHECK(alone.world_size == 1);
}

TEST_CASE("ranks train on GPUs all or none: a mixed world is refused, worded per rank",
          "[environment]") {
  const RankDevice gpu_rank{0, 1};
  const RankDevice cpu_rank{1, 1};  // a second worker on a one-GPU node
  CHECK(gpu_rank.has_gpu());
  CHECK_FALSE(cpu_rank.has_gpu());
  CHECK_FALSE(device_disagreement(0, 2, RankDevice{0, 0}));
  CHECK_FALSE(device_disagreement(2, 2, gpu_rank));
  const auto seen_by_cpu_rank = device_disagreement(1, 2, cpu_rank);
  REQUIRE(seen_by_cpu_rank);
  CHECK_THAT(*seen_by_cpu_rank, Contains("only 1 of 2 ranks have a GPU of their own"));
  CHECK_THAT(*seen_by_cpu_rank, Contains("this rank, LOCAL_RANK 1, sees 1 CUDA device(s)"));
  CHECK_THAT(*seen_by_cpu_rank, Contains("--nproc-per-node gpu"));
  const auto seen_by_gpu_rank = device_disagreement(1, 2, gpu_rank);
  REQUIRE(seen_by_gpu_rank);
  CHECK_THAT(*seen_by_gpu_rank, Contains("this rank trains on cuda:0"));
}

TEST_CASE("progress lines carry epoch, iteration, losses, throughput and ETA", "[report]") {
  ProgressSample s;
  s.epoch = 2;
  s.max_epochs = 4;
  s.step = 10;
  s.steps_in_epoch = 75;
  s.global_step = 85;
  s.train_loss = 2.5;
  s.eval_loss = 2.25;
  s.tokens_per_second = 12345;
  s.elapsed_seconds = 75;
  s.eta_seconds = 3725;
  CHECK(progress_line(s) ==
        "epoch 2/4 | iter 10/75 | train loss 2.5000 | 12345 tok/s | elapsed 1:15 | eta 1:02:05");
  CHECK_THAT(epoch_summary_line(s), Contains("eval loss 2.2500"));
  CHECK_THAT(metrics_json_line(s, "epoch"), Contains("\"eval_loss\":2.25"));
  CHECK(estimate_eta(10.0, 5, 20) == Approx(40.0));
}

TEST_CASE("atomic replacement leaves the old file whole when the writer fails", "[atomic]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ddprun-atomic-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "snapshot.pt").string();
  write_file_atomically(path, [](const ChunkWriter& w) { w("old", 3); });
  CHECK_THROWS_WITH(write_file_atomically(path,
                                          [](const ChunkWriter& w) {
                                            w("new-partial", 11);
                                            throw std::runtime_error("crash mid-write");
                                          }),
                    Contains("crash mid-write"));
  std::ifstream in(path);
  std::string content;
  std::getline(in, content);
  CHECK(content == "old");
  // No temporary file is left behind.
  CHECK(std::distance(std::filesystem::directory_iterator(dir), {}) == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("snapshot generations: older ones move up, the newest stays whole, only ours go",
          "[snapshot]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ddprun-generations-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = (dir / "snapshot.pt").string();
  const auto content = [](const std::string& file) {
    std::ifstream in(file);
    std::string text;
    std::getline(in, text);
    return text;
  };
  const auto names = [&] {
    std::set<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      found.insert(entry.path().filename().string());
    }
    return found;
  };
  for (const char* name : {"snapshot.pt.01", "snapshot.pt.x", "snapshot.pt.-1", "other.pt.1"}) {
    std::ofstream(dir / name) << "not ours";
  }
  std::ofstream(dir / "snapshot.pt.tmp.12345") << "a dead writer's";
  std::ofstream(dir / "snapshot.pt.tmp.x") << "not ours";
  remove_stale_temporaries(path);
  CHECK_FALSE(std::filesystem::exists(dir / "snapshot.pt.tmp.12345"));
  CHECK(std::filesystem::exists(dir / "snapshot.pt.tmp.x"));
  CHECK(existing_generations(path).empty());

  // Three writes with keep 3: each new newest pushes the others one older.
  for (const char* text : {"first", "second", "third", "fourth"}) {
    age_generations(path, 3);
    write_file_atomically(path, [&](const ChunkWriter& w) { w(text, std::strlen(text)); });
  }
  CHECK(content(path) == "fourth");
  CHECK(content(generation_path(path, 1)) == "third");
  CHECK(content(generation_path(path, 2)) == "second");
  CHECK(existing_generations(path) ==
        std::vector<std::string>{path, generation_path(path, 1), generation_path(path, 2)});
  // A generation beyond the kept ones (left by a larger keep) is ours and goes; keep 1: only
  // the newest stays.
  std::ofstream(generation_path(path, 7)) << "older";
  age_generations(path, 1);
  CHECK(names() == std::set<std::string>{"snapshot.pt", "snapshot.pt.01", "snapshot.pt.x",
                                         "snapshot.pt.-1", "other.pt.1", "snapshot.pt.tmp.x"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("step snapshots come every N global steps and/or every S seconds", "[snapshot]") {
  CHECK_FALSE(step_snapshot_due({0, 0.0}, 10, 1e6));  // both off
  CHECK(step_snapshot_due({10, 0.0}, 20, 0.0));
  CHECK_FALSE(step_snapshot_due({10, 0.0}, 21, 1e6));
  CHECK(step_snapshot_due({0, 30.0}, 7, 30.0));
  CHECK_FALSE(step_snapshot_due({0, 30.0}, 7, 29.9));
  CHECK(step_snapshot_due({10, 30.0}, 7, 31.0));  // whichever comes first
  CHECK(step_snapshot_due({10, 30.0}, 30, 0.1));
}

TEST_CASE("the resume record round-trips and refuses what is not one", "[snapshot]") {
  const ResumeRecord record{{3, 7, 2, 1337}, {59, 128, 8, 8, 512}};
  const auto back = decode_resume_record(encode_resume_record(record));
  CHECK(back.position.finished_epoch == 3);
  CHECK(back.position.steps_into_epoch == 7);
  CHECK(back.position.world_size == 2);
  CHECK(back.position.seed == 1337);
  CHECK(back.model.vocab_size == 59);
  CHECK(back.model.n_embd == 512);
  CHECK(back.position.samples_into_epoch == -1);
  auto with_cursor = record;
  with_cursor.position.samples_into_epoch = 56;
  CHECK(decode_resume_record(encode_resume_record(with_cursor)).position.samples_into_epoch == 56);
  // A record of an older ddprun-train has no cursor: -1, derived from the steps at resume.
  auto older = encode_resume_record(record);
  older.replace(older.find(",\"samples_into_epoch\":-1"), 24, "");
  CHECK(decode_resume_record(older).position.samples_into_epoch == -1);
  CHECK_THROWS_WITH(decode_resume_record("[1, 2]"), Contains("not a JSON object"));
  CHECK_THROWS_WITH(decode_resume_record(R"({"format": "ddprun-train/9"})"),
                    Contains("not of format ddprun-train/2"));
  auto text = encode_resume_record(record);
  text.replace(text.find("\"world_size\":2"), 14, "\"world_size\":0");
  CHECK_THROWS_WITH(decode_resume_record(text), Contains("'world_size' is 0, below 1"));
  CHECK_THROWS_WITH(decode_resume_record(std::string(kMaxResumeRecordBytes + 1, ' ')),
                    Contains("more than"));
}

namespace {

void put_le(std::string& out, uint64_t value, int width) {
  for (int k = 0; k < width; ++k) {
    out += static_cast<char>((value >> (8 * k)) & 0xFF);
  }
}

// A zip archive's tail as PyTorch writes it for archives over 4 GiB: one central directory
// entry, the zip64 end record and locator, and an end record whose fields say "see zip64".
std::string zip64_tail(const std::string& name, uint32_t crc) {
  std::string out;
  put_le(out, 0x02014b50, 4);
  out += std::string(12, '\0');  // versions, flags, method, time, date
  put_le(out, crc, 4);
  put_le(out, 0xFFFFFFFF, 4);  // sizes in the zip64 extra field
  put_le(out, 0xFFFFFFFF, 4);
  put_le(out, name.size(), 2);
  put_le(out, 0, 2);            // extra (left out here)
  put_le(out, 0, 2);            // comment
  out += std::string(8, '\0');  // disk, attributes
  put_le(out, 0, 4);            // local header offset
  out += name;
  const uint64_t directory_size = out.size();
  const uint64_t zip64_end = out.size();
  put_le(out, 0x06064b50, 4);
  put_le(out, 44, 8);
  out += std::string(20, '\0');
  put_le(out, 1, 8);  // entries
  put_le(out, directory_size, 8);
  put_le(out, 0, 8);  // directory offset
  put_le(out, 0x07064b50, 4);
  put_le(out, 0, 4);
  put_le(out, zip64_end, 8);
  put_le(out, 1, 4);
  put_le(out, 0x06054b50, 4);
  out += std::string(4, '\0');
  put_le(out, 0xFFFF, 2);
  put_le(out, 0xFFFF, 2);
  put_le(out, 0xFFFFFFFF, 4);
  put_le(out, 0xFFFFFFFF, 4);
  put_le(out, 0, 2);
  return out;
}

std::vector<ZipEntry> directory_of(const std::string& bytes) {
  return read_zip_directory(bytes.size(), [&](uint64_t offset, char* out, size_t n) {
    REQUIRE(offset + n <= bytes.size());
    std::copy_n(bytes.data() + offset, n, out);
  });
}

}  // namespace

// The definition, one bit at a time: what the sliced tables must agree with.
static uint32_t bitwise_crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 1u) != 0 ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
  }
  return ~crc;
}

TEST_CASE("CRC-32 as zip archives compute it", "[snapshot]") {
  CHECK(ddprun::train::crc32("", 0) == 0u);
  CHECK(ddprun::train::crc32("123456789", 9) == 0xCBF43926u);  // the standard check value
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  CHECK(ddprun::train::crc32(fox.data(), fox.size()) == 0x414FA339u);
  std::string bytes;
  uint32_t state = 12345;
  for (int i = 0; i < 5000; ++i) {
    state = state * 1103515245u + 12345u;
    bytes.push_back(static_cast<char>(state >> 24));
  }
  // Every length around the 8-byte step, and every misalignment of the start.
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size = 0; size < 40; ++size) {
      const std::string piece = bytes.substr(offset, size);
      INFO("offset " << offset << ", size " << size);
      CHECK(ddprun::train::crc32(piece.data(), piece.size()) == bitwise_crc32(piece));
    }
  }
  CHECK(ddprun::train::crc32(bytes.data(), bytes.size()) == bitwise_crc32(bytes));
  // Continued in two parts, as a record read in pieces would be.
  const uint32_t first = ddprun::train::crc32(bytes.data(), 1237);
  CHECK(ddprun::train::crc32(bytes.data() + 1237, bytes.size() - 1237, first) ==
        bitwise_crc32(bytes));
}

TEST_CASE("the zip directory is read, zip64 included, and a cut-short archive is named",
          "[snapshot]") {
  const auto bytes = zip64_tail("archive/data/0", 0xDEADBEEF);
  const auto entries = directory_of(bytes);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].name == "archive/data/0");
  CHECK(entries[0].crc32 == 0xDEADBEEFu);
  CHECK_THROWS_WITH(directory_of(bytes.substr(0, bytes.size() - 5)),
                    Contains("no end record (the file was cut short)"));
  auto damaged = bytes;
  damaged[0] = 'X';  // the directory entry's signature
  CHECK_THROWS_WITH(directory_of(damaged), Contains("directory entry 0 is damaged"));
  CHECK_THROWS_WITH(directory_of("PK"), Contains("too short"));
}

TEST_CASE("precision: use_amp and trainer_config.precision per device", "[precision]") {
  const DeviceCaps cpu{};  // no native bf16 or fp16
  const DeviceCaps cpu_bf16{false, 0, 0, true, false};
  const DeviceCaps cpu_fp16{false, 0, 0, true, true};
  const DeviceCaps volta{true, 7, 0, false, true};
  const DeviceCaps hopper{true, 9, 0, true, true};
  struct Case {
    Precision requested;
    bool use_amp;
    DeviceCaps caps;
    Precision expected;
    std::string reason;
  };
  const std::vector<Case> cases{
      {Precision::kAuto, false, hopper, Precision::kFp32, "use_amp is false"},
      {Precision::kAuto, true, hopper, Precision::kBf16, "compute capability 9.0), which has bf16"},
      {Precision::kAuto, true, volta, Precision::kFp16, "fp16 with loss scaling"},
      {Precision::kAuto, true, cpu_bf16, Precision::kBf16, "this CPU, which has native bf16"},
      {Precision::kAuto, true, cpu, Precision::kFp32, "no native bf16"},
      {Precision::kFp32, true, hopper, Precision::kFp32, "(instead of use_amp's choice)"},
      {Precision::kTf32, false, hopper, Precision::kTf32, "trainer_config.precision=tf32"},
      {Precision::kBf16, false, cpu, Precision::kBf16, "emulated and slower than fp32"},
      {Precision::kBf16, false, cpu_bf16, Precision::kBf16, "trainer_config.precision=bf16"},
      {Precision::kFp16, false, volta, Precision::kFp16, "with loss scaling"},
      {Precision::kFp16, false, cpu_fp16, Precision::kFp16, "with loss scaling"},
  };
  for (const auto& c : cases) {
    INFO(precision_name(c.requested) << " use_amp=" << c.use_amp);
    const auto plan = plan_precision(c.requested, c.use_amp, c.caps);
    CHECK(plan.precision == c.expected);
    CHECK(plan.autocast == (c.expected == Precision::kBf16 || c.expected == Precision::kFp16));
    CHECK(plan.loss_scaling == (c.expected == Precision::kFp16));
    CHECK_THAT(plan.reason, Contains(c.reason));
  }
  const std::vector<std::pair<Case, std::string>> refused{
      {{Precision::kFp16, false, cpu, Precision::kFp32, ""},
       "trainer_config.precision=fp16 cannot run on this CPU: it has no native fp16"},
      {{Precision::kFp16, true, cpu_bf16, Precision::kFp32, ""}, "no native fp16"},
      {{Precision::kTf32, false, cpu, Precision::kFp32, ""},
       "trainer_config.precision=tf32 cannot run on this CPU: TF32 is a tensor-core mode"},
      {{Precision::kTf32, false, volta, Precision::kFp32, ""},
       "cannot run on this GPU (compute capability 7.0)"},
      {{Precision::kBf16, true, volta, Precision::kFp32, ""}, "bf16 needs compute capability 8.0"},
  };
  for (const auto& [c, message] : refused) {
    INFO(precision_name(c.requested));
    CHECK_THROWS_WITH(plan_precision(c.requested, c.use_amp, c.caps), Contains(message));
  }
}

TEST_CASE("precision is read once, as a name", "[precision][config]") {
  CHECK(preset("default").trainer.precision == Precision::kAuto);
  CHECK(apply_override(preset("default"), "trainer_config.precision=bf16").trainer.precision ==
        Precision::kBf16);
  CHECK_THROWS_WITH(apply_override(preset("default"), "trainer_config.precision=fp8"),
                    Contains("'trainer_config.precision' must be one of auto, fp32, tf32, bf16, "
                             "fp16, got 'fp8'"));
  for (const auto& name : precision_names()) {
    CHECK(precision_name(*parse_precision(name)) == name);
  }
}
