// The LibTorch model and snapshots of ddprun-train: names, initialisation, causality, snapshot
// round trip, the dropout kernel, and clear errors for corrupt, truncated or mismatched snapshots.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "fast_dropout.hpp"
#include "gpt_model.hpp"
#include "snapshot_io.hpp"
#include "snapshot_state.hpp"

using namespace ddprun::train;
using Catch::Matchers::Contains;

namespace {

GptShape tiny_shape(int64_t n_embd = 32) {
  return GptShape{11, 16, 2, 4, n_embd, 0.0, 0.0, 0.0};
}

struct TempDir {
  TempDir()
      : path(std::filesystem::temp_directory_path() /
             ("ddprun-train-model-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::filesystem::path path;
};

void train_steps(Gpt& model, torch::optim::AdamW& optimizer, int steps, uint64_t data_seed) {
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
  Gpt model(GptShape{11, 16, 2, 4, 128, 0.0, 0.0, 0.0});
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

TEST_CASE("snapshot round trip restores model and optimizer exactly", "[snapshot]") {
  TempDir dir;
  torch::manual_seed(2);
  Gpt a(tiny_shape());
  const auto groups = optimizer_parameter_groups(*a);
  auto opt_a = make_adamw(*a, groups, 1e-3, 0.1);
  train_steps(a, *opt_a, 3, 7);
  const auto path = dir.file("snapshot.pt");
  write_snapshot_file(path, make_snapshot(*a, *opt_a, groups, {5, 2, 2, 1337}));

  torch::manual_seed(3);
  Gpt b(tiny_shape());
  auto opt_b = make_adamw(*b, groups, 1e-3, 0.1);
  const auto position = restore_snapshot(read_snapshot_file(path), path, *b, *opt_b, groups);
  CHECK(position.finished_epoch == 5);
  CHECK(position.steps_into_epoch == 2);
  CHECK(position.world_size == 2);
  for (const auto& item : a->named_parameters()) {
    CHECK(torch::equal(item.value(), b->named_parameters()[item.key()]));
  }
  // The optimizer state came back too: one more identical step keeps them bit-identical.
  train_steps(a, *opt_a, 1, 9);
  train_steps(b, *opt_b, 1, 9);
  for (const auto& item : a->named_parameters()) {
    CHECK(torch::equal(item.value(), b->named_parameters()[item.key()]));
  }
}

TEST_CASE("a snapshot whose optimizer states share one tensor restores them apart", "[snapshot]") {
  TempDir dir;
  torch::manual_seed(5);
  Gpt model(tiny_shape());
  const auto groups = optimizer_parameter_groups(*model);
  auto optimizer = make_adamw(*model, groups, 1e-3, 0.1);
  train_steps(model, *optimizer, 1, 3);
  auto snapshot = make_snapshot(*model, *optimizer, groups, {1, 0, 1, 0});
  // Point two states of the same shape at one tensor object, as a pickle memo can.
  auto field = [](const c10::IValue& dict, const char* name) {
    return dict.toGenericDict().at(c10::IValue(std::string(name)));
  };
  auto state = field(field(snapshot, "optimizer_state"), "state").toGenericDict();
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
  write_snapshot_file(path, snapshot);

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
  TempDir dir;
  torch::manual_seed(4);
  Gpt model(tiny_shape());
  const auto groups = optimizer_parameter_groups(*model);
  auto optimizer = make_adamw(*model, groups, 1e-3, 0.1);
  train_steps(model, *optimizer, 1, 1);
  const auto good = dir.file("good.pt");
  write_snapshot_file(good, make_snapshot(*model, *optimizer, groups, {1, 0, 1, 0}));

  const auto garbage = dir.file("garbage.pt");
  std::ofstream(garbage) << "this is not a zip archive at all";
  CHECK_THROWS_WITH(read_snapshot_file(garbage), Contains(garbage) && Contains("corrupt"));

  const auto truncated = dir.file("truncated.pt");
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(good) / 2);
  CHECK_THROWS_WITH(read_snapshot_file(truncated), Contains(truncated));

  const auto empty = dir.file("empty.pt");
  std::ofstream(empty).close();
  CHECK_THROWS_WITH(read_snapshot_file(empty), Contains("empty"));

  Gpt wider(tiny_shape(64));
  const auto wider_groups = optimizer_parameter_groups(*wider);
  auto wider_opt = make_adamw(*wider, wider_groups, 1e-3, 0.1);
  CHECK_THROWS_WITH(
      restore_snapshot(read_snapshot_file(good), good, *wider, *wider_opt, wider_groups),
      Contains(good) && Contains("n_embd=32"));
}
