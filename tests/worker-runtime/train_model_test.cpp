// The LibTorch model and snapshots of ddprun-train: names, initialisation, causality, snapshot
// round trip, the dropout kernel, the pickle reader, and clear errors for corrupt, truncated or
// mismatched snapshots.
#include <ATen/autocast_mode.h>
#include <caffe2/serialize/inline_container.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>

#include "fast_dropout.hpp"
#include "fused_adamw.hpp"
#include "gpt_model.hpp"
#include "gradient_clipping.hpp"
#include "host_staging.hpp"
#include "mixed_precision.hpp"
#include "snapshot_io.hpp"
#include "snapshot_state.hpp"
#include "temp_dir.hpp"
#include "torch_pickle_reader.hpp"

using namespace ddprun::train;
using Catch::Matchers::Contains;

using ddprun::test::TempDir;

namespace {

GptShape tiny_shape(int64_t n_embd = 32) {
  return GptShape{{11, 16, 2, 4, n_embd}, 0.0, 0.0, 0.0};
}

void train_steps(Gpt& model, FusedAdamW& optimizer, int steps, uint64_t data_seed) {
  auto generator = at::detail::createCPUGenerator(data_seed);
  for (int k = 0; k < steps; ++k) {
    const auto idx = torch::randint(11, {4, 16}, generator, torch::kLong);
    optimizer.zero_grad();
    language_model_loss(model->forward(idx), idx).backward();
    optimizer.step();
  }
}

}  // namespace

TEST_CASE("parameter names and groups are minGPT-ddp's", "[model]") {
  torch::manual_seed(0);
  Gpt model(tiny_shape());
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) {
    names.push_back(item.key());
  }
  for (const char* expected :
       {"emb_stem.pos_emb", "emb_stem.tok_emb.weight", "blocks.0.ln1.weight",
        "blocks.0.attn.c_proj.weight", "blocks.0.attn.attn.in_proj_weight",
        "blocks.0.attn.attn.in_proj_bias", "blocks.0.attn.attn.out_proj.weight",
        "blocks.0.mlp.0.weight", "blocks.1.mlp.2.bias", "ln_f.weight", "head.weight"}) {
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
  CHECK(names.size() == 2 * 14 + 5);  // 14 per block; head has no bias
  CHECK(model->named_buffers().size() == 2);
  CHECK(model->named_buffers().contains("blocks.1.attn.mask"));
  const auto groups = optimizer_parameter_groups(*model);
  CHECK(groups.decay.size() == 2 * 5 + 1);
  CHECK(groups.no_decay.size() == 2 * 9 + 4);
  CHECK(std::is_sorted(groups.decay.begin(), groups.decay.end()));
  CHECK(std::find(groups.decay.begin(), groups.decay.end(), "blocks.0.attn.attn.in_proj_weight") !=
        groups.decay.end());
}

TEST_CASE("initialisation follows minGPT-ddp", "[model]") {
  torch::manual_seed(0);
  Gpt model(GptShape{{11, 16, 2, 4, 128}, 0.0, 0.0, 0.0});
  const auto p = model->named_parameters();
  CHECK(p["emb_stem.pos_emb"].abs().max().item<float>() == 0.0f);
  CHECK(p["blocks.0.mlp.0.weight"].std().item<float>() == Approx(0.02).epsilon(0.05));
  CHECK(p["blocks.0.attn.c_proj.weight"].std().item<float>() == Approx(0.01).epsilon(0.05));
  // in_proj_weight keeps nn.MultiheadAttention's xavier_uniform: std sqrt(2 / (E + 3E)).
  CHECK(p["blocks.0.attn.attn.in_proj_weight"].std().item<float>() ==
        Approx(std::sqrt(2.0 / (4 * 128))).epsilon(0.05));
  CHECK(p["blocks.0.ln1.weight"].min().item<float>() == 1.0f);
  CHECK(p["blocks.0.attn.attn.out_proj.bias"].abs().max().item<float>() == 0.0f);
}

TEST_CASE("causality: future tokens do not change earlier logits", "[model]") {
  torch::manual_seed(1);
  Gpt model(tiny_shape());
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(11, {2, 16}, torch::kLong);
  const auto before = model->forward(idx);
  auto changed = idx.clone();
  changed.narrow(1, 10, 6).copy_((idx.narrow(1, 10, 6) + 1) % 11);
  const auto after = model->forward(changed);
  CHECK(torch::equal(before.narrow(1, 0, 10), after.narrow(1, 0, 10)));
  CHECK_FALSE(torch::allclose(before.narrow(1, 10, 6), after.narrow(1, 10, 6)));
}

namespace {

// The attention this trainer computed before scaled_dot_product_attention, kept as the oracle:
// nn.MultiheadAttention's projections around an explicit causal softmax.
torch::Tensor explicit_causal_attention(const SelfAttentionImpl& attention, const torch::Tensor& x,
                                        int64_t heads) {
  const auto p = attention.named_parameters();
  const int64_t batch = x.size(0);
  const int64_t length = x.size(1);
  const int64_t width = x.size(2);
  const int64_t head_width = width / heads;
  const auto qkv = at::linear(x, p["in_proj_weight"], p["in_proj_bias"])
                       .view({batch, length, 3, heads, head_width})
                       .permute({2, 0, 3, 1, 4});
  auto scores =
      torch::matmul(qkv[0], qkv[1].transpose(-1, -2)) / std::sqrt(static_cast<double>(head_width));
  const auto future = torch::ones({length, length}, torch::kBool).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  const auto mixed = torch::matmul(torch::softmax(scores, -1), qkv[2])
                         .transpose(1, 2)
                         .reshape({batch, length, width});
  return at::linear(mixed, p["out_proj.weight"], p["out_proj.bias"]);
}

}  // namespace

TEST_CASE("scaled_dot_product_attention equals the explicit causal attention", "[model]") {
  torch::manual_seed(3);
  SelfAttention attention(32, 4, /*dropout=*/0.0);
  const auto x = torch::randn({3, 16, 32}, torch::requires_grad());
  const auto ours = attention->forward(x);
  const auto x_oracle = x.detach().clone().requires_grad_(true);
  const auto oracle = explicit_causal_attention(*attention, x_oracle, 4);
  CHECK(torch::allclose(ours, oracle, /*rtol=*/0.0, /*atol=*/1e-5));
  const auto upstream = torch::randn_like(ours);
  ours.backward(upstream);
  oracle.backward(upstream);
  CHECK(torch::allclose(x.grad(), x_oracle.grad(), 0.0, 1e-5));
  // And it is causal: the last position's input does not reach the others.
  const auto changed = x.detach().clone();
  changed.select(1, 15).add_(1.0);
  const auto again = attention->forward(changed);
  CHECK(torch::allclose(again.narrow(1, 0, 15), ours.narrow(1, 0, 15), 0.0, 1e-6));
}

TEST_CASE("the autocast scope runs bf16 and clears its weight cache on exit", "[precision]") {
  torch::manual_seed(4);
  Gpt model(tiny_shape());
  model->eval();
  torch::NoGradGuard no_grad;
  const auto idx = torch::randint(11, {2, 16}, torch::kLong);
  const auto run = [&] {
    const AutocastScope scope(torch::kCPU, at::kBFloat16);
    return model->forward(idx);
  };
  const auto first = run();
  CHECK(first.scalar_type() == at::kBFloat16);
  CHECK(!at::autocast::is_autocast_enabled(at::kCPU));  // restored after the scope
  // An optimizer step changes the weights in place; the next scope must cast them anew.
  for (auto& p : model->parameters()) {
    p.add_(0.01);
  }
  const auto second = run();
  Gpt fresh(tiny_shape());
  fresh->eval();
  {
    auto target = fresh->parameters();
    auto source = model->parameters();
    for (size_t k = 0; k < target.size(); ++k) {
      target[k].copy_(source[k]);
    }
  }
  const AutocastScope scope(torch::kCPU, at::kBFloat16);
  CHECK(torch::equal(second, fresh->forward(idx)));
  CHECK_FALSE(torch::equal(second, first));
}

TEST_CASE("bf16 training follows fp32 training on the same seed", "[precision]") {
  // 30 steps of the tiny GPT, dropout off, the same data: the bf16 run's last loss is within 3%
  // of the fp32 run's (the weights, moments and optimizer stay fp32 in both).
  const auto train = [](std::optional<at::ScalarType> dtype) {
    torch::manual_seed(5);
    Gpt model(tiny_shape());
    const auto groups = optimizer_parameter_groups(*model);
    auto optimizer = make_adamw(*model, groups, 3e-3, 0.1);
    auto generator = at::detail::createCPUGenerator(9);
    double loss_value = 0.0;
    for (int step = 0; step < 30; ++step) {
      const auto idx = torch::randint(11, {8, 16}, generator, torch::kLong);
      torch::Tensor loss;
      {
        const AutocastScope scope(torch::kCPU, dtype);
        loss = language_model_loss(model->forward(idx).to(torch::kFloat), idx);
      }
      optimizer->zero_grad();
      loss.backward();
      optimizer->step();
      loss_value = loss.item<double>();
    }
    return loss_value;
  };
  const double fp32 = train(std::nullopt);
  const double bf16 = train(at::kBFloat16);
  INFO("fp32 " << fp32 << ", bf16 " << bf16);
  CHECK(fp32 < 2.3);  // it learned something (ln 11 = 2.40 at the start)
  CHECK(std::abs(bf16 - fp32) <= 0.03 * fp32);
}

TEST_CASE("fused AdamW takes the steps LibTorch's AdamW takes", "[optimizer]") {
  torch::manual_seed(6);
  const std::vector<torch::Tensor> start{torch::randn({7, 5}), torch::randn({5}),
                                         torch::randn({3, 4, 2})};
  const auto copies = [&] {
    std::vector<torch::Tensor> params;
    for (const auto& t : start) {
      params.push_back(t.clone().requires_grad_(true));
    }
    return params;
  };
  auto fused_params = copies();
  auto plain_params = copies();
  const auto options = [] {
    return torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
  };
  FusedAdamW fused(fused_params, options());
  torch::optim::AdamW plain(plain_params, options());
  auto generator = at::detail::createCPUGenerator(11);
  for (int step = 0; step < 8; ++step) {
    for (size_t k = 0; k < start.size(); ++k) {
      const auto grad = torch::randn(start[k].sizes(), generator);
      fused_params[k].mutable_grad() = grad.clone();
      plain_params[k].mutable_grad() = grad.clone();
    }
    fused.step();
    plain.step();
  }
  for (size_t k = 0; k < start.size(); ++k) {
    INFO("parameter " << k);
    CHECK(torch::allclose(fused_params[k], plain_params[k], 0.0, 1e-6));
    const auto& a = static_cast<const torch::optim::AdamWParamState&>(
        *fused.state().at(fused_params[k].unsafeGetTensorImpl()));
    const auto& b = static_cast<const torch::optim::AdamWParamState&>(
        *plain.state().at(plain_params[k].unsafeGetTensorImpl()));
    CHECK(a.step() == 8);
    CHECK(b.step() == 8);
    CHECK(torch::allclose(a.exp_avg_sq(), b.exp_avg_sq(), 0.0, 1e-7));
  }
}

TEST_CASE("clipping by the foreach norm is clip_grad_norm_", "[optimizer]") {
  torch::manual_seed(8);
  std::vector<torch::Tensor> ours{torch::randn({6, 3}) * 4, torch::randn({9})};
  std::vector<torch::Tensor> theirs;
  for (const auto& g : ours) {
    theirs.push_back(torch::zeros_like(g, torch::requires_grad()));
    theirs.back().mutable_grad() = g.clone();
  }
  const auto total = clip_gradient_norm(ours, 1.0);
  const double expected = torch::nn::utils::clip_grad_norm_(theirs, 1.0);
  CHECK(total.item<double>() == Approx(expected).epsilon(1e-6));
  for (size_t k = 0; k < ours.size(); ++k) {
    CHECK(torch::allclose(ours[k], theirs[k].grad(), 0.0, 1e-6));
  }
}

TEST_CASE("fast_dropout keeps 1 - p of the elements, scaled, as a function of the seed",
          "[model]") {
  const auto input = torch::ones({1000, 1001}, torch::requires_grad());  // odd element count
  torch::manual_seed(7);
  const auto output = fast_dropout(input, 0.1, /*training=*/true);
  const auto kept = (output != 0).to(torch::kDouble).mean().item<double>();
  CHECK(kept == Approx(0.9).margin(0.002));  // 1e6 draws: the standard deviation is 0.0003
  const auto nonzero = output.masked_select(output != 0);
  CHECK(torch::allclose(nonzero, torch::full_like(nonzero, 1.0 / 0.9)));
  // Neighbouring elements come from the two halves of one 64-bit draw: they must not agree
  // more often than independent coins do.
  const auto flat = (output.reshape({-1}) != 0).to(torch::kDouble);
  const auto both = (flat.narrow(0, 0, 1000000) * flat.narrow(0, 1, 1000000)).mean().item<double>();
  CHECK(both == Approx(0.81).margin(0.003));

  // The gradient flows through the kept elements only, with the same scale.
  output.sum().backward();
  CHECK(torch::equal(input.grad(), output.detach()));

  torch::manual_seed(7);
  CHECK(torch::equal(fast_dropout(input, 0.1, true), output));
  torch::manual_seed(8);
  CHECK_FALSE(torch::equal(fast_dropout(input, 0.1, true), output));
  CHECK(torch::equal(fast_dropout(input, 0.1, /*training=*/false), input));
  CHECK(torch::equal(fast_dropout(input, 0.0, true), input));
  CHECK(fast_dropout(input, 1.0, true).abs().sum().item<double>() == 0.0);
}

namespace {

c10::IValue field(const c10::IValue& dict, const char* name) {
  return dict.toGenericDict().at(c10::IValue(std::string(name)));
}

// Hand-written pickles for the reader's edge cases (opcodes as in Python's pickletools).
class PickleBytes {
 public:
  PickleBytes() { bytes_ += "\x80\x02"; }  // PROTO 2
  PickleBytes& op(char code) {
    bytes_ += code;
    return *this;
  }
  PickleBytes& text(const std::string& s) {
    bytes_ += 'X';
    for (int k = 0; k < 4; ++k) {
      bytes_ += static_cast<char>((s.size() >> (8 * k)) & 0xFF);
    }
    bytes_ += s;
    return *this;
  }
  PickleBytes& small_int(uint8_t v) {
    bytes_ += 'K';
    bytes_ += static_cast<char>(v);
    return *this;
  }
  PickleBytes& global(const std::string& module, const std::string& name) {
    bytes_ += 'c' + module + '\n' + name + '\n';
    return *this;
  }
  PickleBytes& put(uint8_t index) {
    bytes_ += 'q';
    bytes_ += static_cast<char>(index);
    return *this;
  }
  PickleBytes& get(uint8_t index) {
    bytes_ += 'h';
    bytes_ += static_cast<char>(index);
    return *this;
  }
  // _rebuild_tensor_v2 over storage `key` of `numel` floats, viewed as `rows` x `cols` at
  // `offset` (rows and cols below 256).
  PickleBytes& tensor(const std::string& key, uint8_t numel, uint8_t offset, uint8_t rows,
                      uint8_t cols) {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').text("storage").global("torch", "FloatStorage").text(key).text("cpu");
    small_int(numel).op('t').op('Q').small_int(offset);
    small_int(rows).small_int(cols).op('\x86').small_int(cols).small_int(1).op('\x86');
    op('\x89').global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  const std::string& str() const { return bytes_; }

 private:
  std::string bytes_;
};

c10::IValue unpickle(const std::string& bytes) {
  return read_torch_pickle(bytes, [](const StorageRequest& request) {
    return torch::arange(request.numel, torch::TensorOptions().dtype(request.dtype));
  });
}

// A torch.save-layout archive holding the given records (as PyTorch's writer lays them out).
void write_archive(const std::string& path,
                   const std::vector<std::pair<std::string, std::string>>& records) {
  caffe2::serialize::PyTorchStreamWriter zip(path);
  for (const auto& [name, bytes] : records) {
    zip.writeRecord(name, bytes.data(), bytes.size());
  }
  zip.writeEndOfFile();
}

Gpt seeded_tiny_gpt(uint64_t seed) {
  torch::manual_seed(seed);
  return Gpt(tiny_shape());
}

// A tiny GPT and its AdamW, trained a few steps so the optimizer has state to snapshot.
struct TrainedTinyGpt {
  TrainedTinyGpt(uint64_t seed, int steps, uint64_t data_seed)
      : model(seeded_tiny_gpt(seed)),
        groups(optimizer_parameter_groups(*model)),
        optimizer(make_adamw(*model, groups, 1e-3, 0.1)) {
    train_steps(model, *optimizer, steps, data_seed);
  }
  SnapshotParts snapshot(const TrainingPosition& position) const {
    HostStaging staging;  // the parts keep its buffers alive
    return make_snapshot(*model, *optimizer, groups, position, staging);
  }
  // Returns path, for a one-line "a snapshot at path".
  std::string write_snapshot(const std::string& path) const {
    const auto parts = snapshot({1, 0, 1, 0});
    write_snapshot_file(path, parts.content, parts.resume_record);
    return path;
  }

  Gpt model;
  ParameterGroups groups;
  std::unique_ptr<FusedAdamW> optimizer;
};

}  // namespace

TEST_CASE("snapshot round trip restores model and optimizer exactly", "[snapshot]") {
  TempDir dir("model");
  TrainedTinyGpt trained(2, 3, 7);
  auto& a = trained.model;
  auto& opt_a = trained.optimizer;
  const auto& groups = trained.groups;
  const auto path = dir.file("snapshot.pt");
  const auto parts = trained.snapshot({5, 2, 2, 1337});
  write_snapshot_file(path, parts.content, parts.resume_record);

  const auto file = read_snapshot_file(path);
  // minGPT-ddp's Snapshot(**d) takes these three keys and no others.
  std::set<std::string> keys;
  for (const auto& entry : file.content.toGenericDict()) {
    keys.insert(entry.key().toStringRef());
  }
  CHECK(keys == std::set<std::string>{"model_state", "optimizer_state", "finished_epoch"});
  REQUIRE(file.resume_record);
  CHECK(decode_resume_record(*file.resume_record).position.steps_into_epoch == 2);

  Gpt b = seeded_tiny_gpt(3);
  auto opt_b = make_adamw(*b, groups, 5e-2, 0.3);  // as minGPT-ddp: the snapshot's settings win
  const auto restored = restore_snapshot(file, path, *b, *opt_b, groups);
  CHECK(restored.has_resume_record);
  CHECK(restored.position.finished_epoch == 5);
  CHECK(restored.position.steps_into_epoch == 2);
  CHECK(restored.position.world_size == 2);
  CHECK(restored.learning_rate == 1e-3);
  CHECK(restored.weight_decay == 0.1);
  for (const auto& item : a->named_parameters()) {
    CHECK(torch::equal(item.value(), b->named_parameters()[item.key()]));
  }
  // The optimizer state and settings came back too: one more identical step keeps them
  // bit-identical.
  train_steps(a, *opt_a, 1, 9);
  train_steps(b, *opt_b, 1, 9);
  for (const auto& item : a->named_parameters()) {
    CHECK(torch::equal(item.value(), b->named_parameters()[item.key()]));
  }
}

TEST_CASE("host staging copies the state as it was, into buffers kept between captures",
          "[snapshot]") {
  HostStaging staging;
  auto live = torch::arange(6, torch::kFloat).reshape({2, 3});
  auto counts = torch::tensor(4.0F);
  staging.begin();
  const auto first = staging.copy(live);
  const auto first_count = staging.copy(counts);
  CHECK_FALSE(staging.end());  // CPU copies are complete when copy() returns
  live.add_(10);
  counts.add_(1);
  staging.before_update();
  CHECK(torch::equal(first, torch::arange(6, torch::kFloat).reshape({2, 3})));
  CHECK(first_count.item<float>() == 4.0F);
  CHECK(first.data_ptr() != live.data_ptr());

  staging.begin();
  const auto second = staging.copy(live);
  const auto second_count = staging.copy(counts);
  staging.end();
  CHECK(second.data_ptr() == first.data_ptr());  // the same buffer, no new allocation
  CHECK(torch::equal(second, live));
  CHECK(second_count.item<float>() == 5.0F);
  // A tensor of another shape gets a buffer of its own.
  staging.begin();
  const auto other = staging.copy(torch::ones({4}));
  staging.end();
  CHECK(other.sizes() == c10::IntArrayRef{4});
  CHECK(torch::equal(other, torch::ones({4})));
}

TEST_CASE("a snapshot counts only the steps taken, skipped ones taken back on the device",
          "[snapshot]") {
  TrainedTinyGpt trained(4, 2, 3);
  const auto overflow = torch::tensor(1.0F);
  const auto fine = torch::tensor(0.0F);
  auto generator = at::detail::createCPUGenerator(5);
  for (const auto& found_inf : {overflow, fine, overflow}) {
    const auto idx = torch::randint(11, {4, 16}, generator, torch::kLong);
    trained.optimizer->zero_grad();
    language_model_loss(trained.model->forward(idx), idx).backward();
    trained.optimizer->step_unless(found_inf);
  }
  // 2 plain steps, then one of three: PyTorch's AdamW would say 3.
  const auto parts = trained.snapshot({1, 0, 1, 0});
  const auto state = parts.content.toGenericDict()
                         .at("optimizer_state")
                         .toGenericDict()
                         .at("state")
                         .toGenericDict();
  REQUIRE(state.size() > 0);
  for (const auto& entry : state) {
    const auto step = entry.value().toGenericDict().at("step").toTensor();
    CHECK(step.dim() == 0);
    CHECK(step.scalar_type() == torch::kFloat);
    CHECK(step.item<float>() == 3.0F);
  }
}

TEST_CASE("a snapshot whose optimizer states share one tensor restores them apart", "[snapshot]") {
  TempDir dir("model");
  const TrainedTinyGpt trained(5, 1, 3);
  const auto& groups = trained.groups;
  auto parts = trained.snapshot({1, 0, 1, 0});
  // Point two states of the same shape at one tensor object, as a pickle memo can.
  auto state = field(field(parts.content, "optimizer_state"), "state").toGenericDict();
  std::optional<c10::IValue> first;
  std::optional<c10::IValue> second;
  for (const auto& entry : state) {
    if (!first) {
      first = entry.key();
    } else if (!second && field(entry.value(), "exp_avg").toTensor().sizes() ==
                              field(state.at(*first), "exp_avg").toTensor().sizes()) {
      second = entry.key();
    }
  }
  REQUIRE(second);
  state.at(*second).toGenericDict().insert_or_assign(c10::IValue(std::string("exp_avg")),
                                                     field(state.at(*first), "exp_avg"));
  const auto path = dir.file("shared.pt");
  write_snapshot_file(path, parts.content, parts.resume_record);

  Gpt restored(tiny_shape());
  auto restored_optimizer = make_adamw(*restored, groups, 1e-3, 0.1);
  restore_snapshot(read_snapshot_file(path), path, *restored, *restored_optimizer, groups);
  std::set<const void*> exp_avg_memory;
  for (const auto& [key, param_state] : restored_optimizer->state()) {
    const auto& adam = static_cast<const torch::optim::AdamWParamState&>(*param_state);
    CHECK(exp_avg_memory.insert(adam.exp_avg().data_ptr()).second);
    CHECK(adam.exp_avg().data_ptr() != adam.exp_avg_sq().data_ptr());
  }
}

TEST_CASE("unusable snapshots give an error naming the file and the reason", "[snapshot]") {
  TempDir dir("model");
  const auto good = TrainedTinyGpt(4, 1, 1).write_snapshot(dir.file("good.pt"));

  const auto garbage = dir.file("garbage.pt");
  std::ofstream(garbage) << "this is not a zip archive at all";
  CHECK_THROWS_WITH(read_snapshot_file(garbage),
                    Contains(garbage) && Contains("not a zip archive"));

  const auto truncated = dir.file("truncated.pt");
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(good) / 2);
  CHECK_THROWS_WITH(read_snapshot_file(truncated),
                    Contains(truncated) && Contains("no end record (the file was cut short)"));

  const auto empty = dir.file("empty.pt");
  std::ofstream(empty).close();
  CHECK_THROWS_WITH(read_snapshot_file(empty), Contains("empty"));

  // One byte of a tensor changed on disk: PyTorch would load it silently; the CRC-32 catches it.
  const auto damaged = dir.file("damaged.pt");
  {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The first tensor record's local header: 30 bytes, its name, its extra field, its data.
    const auto header = bytes.rfind("PK\x03\x04", bytes.find("data/0"));
    REQUIRE(header != std::string::npos);
    auto u16 = [&](size_t at) {
      return static_cast<size_t>(static_cast<unsigned char>(bytes[at])) |
             static_cast<size_t>(static_cast<unsigned char>(bytes[at + 1])) << 8;
    };
    bytes[header + 30 + u16(header + 26) + u16(header + 28) + 1] ^= 0x5A;
    std::ofstream(damaged, std::ios::binary) << bytes;
  }
  CHECK_THROWS_WITH(read_snapshot_file(damaged),
                    Contains(damaged) && Contains("record data/") && Contains("CRC-32"));

  Gpt wider(tiny_shape(64));
  const auto wider_groups = optimizer_parameter_groups(*wider);
  auto wider_opt = make_adamw(*wider, wider_groups, 1e-3, 0.1);
  CHECK_THROWS_WITH(
      restore_snapshot(read_snapshot_file(good), good, *wider, *wider_opt, wider_groups),
      Contains(good) && Contains("holds a model with n_layer=2, n_head=4, n_embd=32") &&
          Contains("this run builds n_layer=2, n_head=4, n_embd=64"));

  // Archives that are whole but do not hold a state-dict snapshot.
  const std::string storage(6 * sizeof(float), '\0');
  const std::vector<std::pair<std::string, std::string>> cases{
      {"a pickled Python object",
       PickleBytes().global("os", "system").text("true").op('\x85').op('R').op('.').str()},
      {"a pickle cut short", PickleBytes().op('}').op('(').text("model_state").str()},
      {"a tensor outside its storage", PickleBytes().tensor("0", 6, 4, 2, 3).op('.').str()},
      {"a storage of the wrong size", PickleBytes().tensor("0", 8, 0, 2, 3).op('.').str()},
  };
  const std::vector<std::string> reasons{
      "data.pkl: the pickle refers to os.system, which is not part of a tensor state dict",
      "data.pkl: the pickle ends before its STOP opcode (truncated)",
      "does not fit its storage of 6 elements",
      "record data/0 holds 24 bytes, but data.pkl says it is 8 elements of 4 bytes",
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO(cases[k].first);
    const auto path = dir.file("case" + std::to_string(k) + ".pt");
    write_archive(path, {{"data.pkl", cases[k].second}, {"data/0", storage}});
    CHECK_THROWS_WITH(read_snapshot_file(path), Contains(path) && Contains(reasons[k]));
  }
  const auto no_pickle = dir.file("no_pickle.pt");
  write_archive(no_pickle, {{"data/0", storage}});
  CHECK_THROWS_WITH(read_snapshot_file(no_pickle), Contains("no data.pkl record"));
}

TEST_CASE("the pickle reader takes torch.save's OrderedDicts and refuses what is not data",
          "[snapshot]") {
  // OrderedDict() with a state dict's BUILD (_metadata), int keys, a float, a tensor view.
  const auto ordered = PickleBytes()
                           .global("collections", "OrderedDict")
                           .op(')')
                           .op('R')
                           .put(0)
                           .op('(')
                           .text("w")
                           .tensor("0", 6, 0, 2, 3)
                           .small_int(7)
                           .text("x")
                           .op('u')
                           .op('}')
                           .text("_metadata")
                           .op('}')
                           .op('s')
                           .op('b')
                           .op('.')
                           .str();
  const auto value = unpickle(ordered);
  REQUIRE(value.isGenericDict());
  const auto dict = value.toGenericDict();
  CHECK(dict.size() == 2);
  CHECK(torch::equal(dict.at(c10::IValue(std::string("w"))).toTensor(),
                     torch::arange(6, torch::kFloat).view({2, 3})));
  CHECK(dict.at(c10::IValue(int64_t{7})).toStringRef() == "x");

  // A list appended into itself (through the memo): recursive data is refused.
  const auto recursive = PickleBytes().op(']').put(1).op('(').get(1).op('e').op('.').str();
  CHECK_THROWS_WITH(unpickle(recursive), Contains("holds itself"));
  // A container changed after it was nested.
  const auto changed =
      PickleBytes().op(']').put(1).op(']').get(1).op('a').get(1).small_int(1).op('a').op('.').str();
  CHECK_THROWS_WITH(unpickle(changed), Contains("after nesting it"));
  // Nesting is bounded.
  auto deep = PickleBytes();
  for (int k = 0; k < kMaxPickleNesting + 1; ++k) {
    deep.op(']');
  }
  for (int k = 0; k < kMaxPickleNesting; ++k) {
    deep.op('a');
  }
  CHECK_THROWS_WITH(unpickle(deep.op('.').str()), Contains("nest deeper than"));
  CHECK_THROWS_WITH(unpickle(PickleBytes().get(9).op('.').str()), Contains("memo entry 9"));
  CHECK_THROWS_WITH(unpickle(PickleBytes().op('o').op('.').str()),
                    Contains("unsupported pickle opcode 0x6f"));
  CHECK_THROWS_WITH(unpickle(PickleBytes().small_int(1).str()), Contains("before its STOP"));
}

TEST_CASE("damaged pickles fail with a PickleError, never otherwise", "[snapshot]") {
  // A real snapshot's data.pkl, damaged in many deterministic ways: every result is either a
  // value or a PickleError (no crash, no other exception, no unbounded allocation).
  TempDir dir("model");
  const auto path = TrainedTinyGpt(6, 1, 1).write_snapshot(dir.file("fuzz.pt"));
  caffe2::serialize::PyTorchStreamReader zip(path);
  const auto [data, size] = zip.getRecord("data.pkl");
  const std::string pickle(static_cast<const char*>(data.get()), size);
  const StorageLoader loader = [](const StorageRequest& request) {
    if (request.numel > 4096) {
      throw PickleError("larger than any storage of this snapshot");
    }
    return torch::zeros({request.numel}, torch::TensorOptions().dtype(request.dtype));
  };
  REQUIRE_NOTHROW(read_torch_pickle(pickle, loader));
  std::mt19937_64 random(12345);
  int refused = 0;
  constexpr int kCases = 3000;
  for (int k = 0; k < kCases; ++k) {
    std::string damaged = pickle;
    const auto at = static_cast<size_t>(random() % damaged.size());
    switch (k % 3) {
      case 0:
        damaged[at] = static_cast<char>(random());
        break;
      case 1:
        damaged.resize(at);
        break;
      default:
        damaged.erase(at, 1 + random() % 8);
        break;
    }
    try {
      read_torch_pickle(damaged, loader);
    } catch (const PickleError&) {
      ++refused;
    }
  }
  CHECK(refused > kCases / 2);
}
