#include "snapshot_state.hpp"

#include <map>
#include <sstream>
#include <unordered_set>

#include "snapshot_io.hpp"

namespace ddprun::train {
namespace {

using Dict = c10::impl::GenericDict;

Dict make_dict() {
  return Dict(c10::StringType::get(), c10::AnyType::get());
}

std::string shape_text(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

std::map<std::string, torch::Tensor> parameters_by_name(const GptImpl& model) {
  std::map<std::string, torch::Tensor> named;
  for (const auto& item : model.named_parameters()) {
    named.emplace(item.key(), item.value());
  }
  return named;
}

// LibTorch's optimizers key their per-parameter state by the parameter's TensorImpl (since 2.2).
void* state_key(const torch::Tensor& parameter) {
  return parameter.unsafeGetTensorImpl();
}

torch::Tensor to_cpu(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU);
}

// Reading helpers that turn a wrong type into a message naming the file and the field.
class SnapshotReader {
 public:
  explicit SnapshotReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw SnapshotError("snapshot " + path_ + ": " + what);
  }

  const c10::IValue& field(const Dict& dict, const std::string& key,
                           const std::string& where) const {
    const auto it = dict.find(c10::IValue(key));
    if (it == dict.end()) {
      fail("missing " + where + key);
    }
    return it->value();
  }

  Dict dict(const c10::IValue& value, const std::string& what) const {
    if (!value.isGenericDict()) {
      fail(what + " is not a dict");
    }
    return value.toGenericDict();
  }

  int64_t integer(const c10::IValue& value, const std::string& what) const {
    if (value.isInt()) {
      return value.toInt();
    }
    if (value.isTensor() && value.toTensor().numel() == 1) {
      return static_cast<int64_t>(value.toTensor().item<double>());
    }
    fail(what + " is not an integer");
  }

  torch::Tensor tensor(const c10::IValue& value, const std::string& what,
                       c10::IntArrayRef expected) const {
    if (!value.isTensor()) {
      fail(what + " is not a tensor");
    }
    auto t = value.toTensor();
    if (t.sizes() != expected) {
      fail(what + " has shape " + shape_text(t.sizes()) + " but this model needs " +
           shape_text(expected) + " (snapshot of a different configuration?)");
    }
    if (t.scalar_type() != torch::kFloat) {
      fail(what + " is not float32");
    }
    return t;
  }

 private:
  std::string path_;
};

// The loaded tensor itself when nothing else can see its memory (the usual case: a whole
// storage of its own, used once), else a copy. Skipping the copy saves two thirds of a
// resume's memory traffic; copying shared memory keeps optimizer states from aliasing.
torch::Tensor owned_copy(const torch::Tensor& loaded, std::unordered_set<const void*>& taken) {
  const bool exclusive = loaded.is_contiguous() && loaded.storage_offset() == 0 &&
                         loaded.storage().nbytes() == loaded.nbytes() &&
                         loaded.storage().use_count() == 1 &&
                         taken.insert(loaded.storage().data()).second;
  return exclusive ? loaded : loaded.clone();
}

}  // namespace

std::unique_ptr<torch::optim::AdamW> make_adamw(GptImpl& model, const ParameterGroups& groups,
                                                double learning_rate, double weight_decay) {
  const auto named = parameters_by_name(model);
  auto group_of = [&](const std::vector<std::string>& names, double decay) {
    std::vector<torch::Tensor> params;
    for (const auto& name : names) {
      params.push_back(named.at(name));
    }
    auto options = std::make_unique<torch::optim::AdamWOptions>(learning_rate);
    options->betas({0.9, 0.95}).weight_decay(decay).eps(1e-8).amsgrad(false);
    return torch::optim::OptimizerParamGroup(params, std::move(options));
  };
  std::vector<torch::optim::OptimizerParamGroup> param_groups{group_of(groups.decay, weight_decay),
                                                              group_of(groups.no_decay, 0.0)};
  return std::make_unique<torch::optim::AdamW>(param_groups,
                                               torch::optim::AdamWOptions(learning_rate));
}

c10::IValue make_snapshot(const GptImpl& model, const torch::optim::AdamW& optimizer,
                          const ParameterGroups& groups, const TrainingPosition& position) {
  auto model_state = make_dict();
  for (const auto& item : model.named_parameters()) {
    model_state.insert(item.key(), to_cpu(item.value()));
  }
  for (const auto& item : model.named_buffers()) {
    model_state.insert(item.key(), to_cpu(item.value()));
  }

  const auto named = parameters_by_name(model);
  auto state = Dict(c10::IntType::get(), c10::AnyType::get());
  auto param_groups = c10::impl::GenericList(c10::AnyType::get());
  int64_t index = 0;
  const std::vector<const std::vector<std::string>*> ordered{&groups.decay, &groups.no_decay};
  for (size_t g = 0; g < ordered.size(); ++g) {
    const auto& options =
        static_cast<const torch::optim::AdamWOptions&>(optimizer.param_groups()[g].options());
    auto indices = c10::impl::GenericList(c10::AnyType::get());  // not an IntList: no build_intlist
    for (const auto& name : *ordered[g]) {
      const auto it = optimizer.state().find(state_key(named.at(name)));
      if (it != optimizer.state().end()) {
        const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
        auto entry = make_dict();
        // PyTorch >= 1.12 keeps `step` as a float32 0-d tensor.
        entry.insert("step", torch::tensor(static_cast<float>(s.step())));
        entry.insert("exp_avg", to_cpu(s.exp_avg()));
        entry.insert("exp_avg_sq", to_cpu(s.exp_avg_sq()));
        state.insert(index, entry);
      }
      indices.push_back(index);
      ++index;
    }
    auto group = make_dict();
    group.insert("lr", options.lr());
    group.insert("betas", c10::ivalue::Tuple::create(
                              {std::get<0>(options.betas()), std::get<1>(options.betas())}));
    group.insert("eps", options.eps());
    group.insert("weight_decay", options.weight_decay());
    group.insert("amsgrad", options.amsgrad());
    group.insert("maximize", false);
    group.insert("foreach", c10::IValue());
    group.insert("capturable", false);
    group.insert("params", indices);
    param_groups.push_back(group);
  }
  auto optimizer_state = make_dict();
  optimizer_state.insert("state", state);
  optimizer_state.insert("param_groups", param_groups);

  const auto& shape = model.shape();
  auto resume = make_dict();
  resume.insert("format", std::string("ddprun-train/1"));
  resume.insert("steps_into_epoch", position.steps_into_epoch);
  resume.insert("world_size", position.world_size);
  resume.insert("seed", position.seed);
  resume.insert("n_layer", shape.n_layer);
  resume.insert("n_head", shape.n_head);
  resume.insert("n_embd", shape.n_embd);
  resume.insert("vocab_size", shape.vocab_size);
  resume.insert("block_size", shape.block_size);

  auto snapshot = make_dict();
  snapshot.insert("model_state", model_state);
  snapshot.insert("optimizer_state", optimizer_state);
  snapshot.insert("finished_epoch", position.finished_epoch);
  snapshot.insert("resume_state", resume);
  return snapshot;
}

TrainingPosition restore_snapshot(const c10::IValue& snapshot, const std::string& path,
                                  GptImpl& model, torch::optim::AdamW& optimizer,
                                  const ParameterGroups& groups) {
  const SnapshotReader read(path);
  const auto top = read.dict(snapshot, "the top level");
  TrainingPosition position;
  position.finished_epoch = read.integer(read.field(top, "finished_epoch", ""), "finished_epoch");
  if (position.finished_epoch < 0) {
    read.fail("finished_epoch is negative");
  }

  const auto& shape = model.shape();
  const auto resume_it = top.find(c10::IValue(std::string("resume_state")));
  if (resume_it != top.end()) {
    const auto resume = read.dict(resume_it->value(), "resume_state");
    auto check = [&](const char* key, int64_t expected) {
      const auto value = read.integer(read.field(resume, key, "resume_state."), key);
      if (value != expected) {
        read.fail(std::string("was written for ") + key + "=" + std::to_string(value) +
                  " but this run has " + key + "=" + std::to_string(expected));
      }
    };
    check("n_layer", shape.n_layer);
    check("n_head", shape.n_head);
    check("n_embd", shape.n_embd);
    check("vocab_size", shape.vocab_size);
    check("block_size", shape.block_size);
    position.steps_into_epoch =
        read.integer(read.field(resume, "steps_into_epoch", "resume_state."), "steps_into_epoch");
    position.world_size =
        read.integer(read.field(resume, "world_size", "resume_state."), "world_size");
    position.seed = read.integer(read.field(resume, "seed", "resume_state."), "seed");
    if (position.steps_into_epoch < 0) {
      read.fail("resume_state.steps_into_epoch is negative");
    }
  }

  // Model: strict, like load_state_dict(strict=True).
  const auto model_state = read.dict(read.field(top, "model_state", ""), "model_state");
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  size_t expected_entries = 0;
  auto collect = [&](const std::string& name, const torch::Tensor& target) {
    ++expected_entries;
    const auto it = model_state.find(c10::IValue(name));
    if (it == model_state.end()) {
      read.fail("model_state has no entry '" + name + "'");
    }
    copies.emplace_back(target,
                        read.tensor(it->value(), "model_state['" + name + "']", target.sizes()));
  };
  for (const auto& item : model.named_parameters()) {
    collect(item.key(), item.value());
  }
  for (const auto& item : model.named_buffers()) {
    collect(item.key(), item.value());
  }
  if (model_state.size() != expected_entries) {
    read.fail("model_state has " + std::to_string(model_state.size()) + " entries, this model " +
              std::to_string(expected_entries));
  }

  // Optimizer: PyTorch's layout, indices over the decay names then the no-decay names.
  const auto optimizer_state = read.dict(read.field(top, "optimizer_state", ""), "optimizer_state");
  const auto state =
      read.dict(read.field(optimizer_state, "state", "optimizer_state."), "optimizer_state.state");
  const auto& groups_value = read.field(optimizer_state, "param_groups", "optimizer_state.");
  if (!groups_value.isList() || groups_value.toListRef().size() != 2) {
    read.fail("optimizer_state.param_groups is not a list of two groups (decay, no decay)");
  }
  const auto named = parameters_by_name(model);
  std::vector<std::string> ordered = groups.decay;
  ordered.insert(ordered.end(), groups.no_decay.begin(), groups.no_decay.end());
  for (size_t g = 0; g < 2; ++g) {
    const auto group = read.dict(groups_value.toListRef()[g], "optimizer_state.param_groups[i]");
    const auto& params = read.field(group, "params", "param_groups[i].");
    const size_t expected = g == 0 ? groups.decay.size() : groups.no_decay.size();
    if (!params.isList() || params.toListRef().size() != expected) {
      read.fail("optimizer_state.param_groups[" + std::to_string(g) + "] does not hold " +
                std::to_string(expected) + " parameters");
    }
  }
  std::vector<std::pair<void*, std::unique_ptr<torch::optim::AdamWParamState>>> states;
  std::unordered_set<const void*> taken;
  for (const auto& entry : state) {
    const auto index = read.integer(entry.key(), "an optimizer state index");
    if (index < 0 || index >= static_cast<int64_t>(ordered.size())) {
      read.fail("optimizer state index " + std::to_string(index) + " is out of range");
    }
    const auto& name = ordered[static_cast<size_t>(index)];
    const auto& param = named.at(name);
    const auto where = "optimizer_state.state[" + std::to_string(index) + "]";
    const auto slot = read.dict(entry.value(), where);
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(read.integer(read.field(slot, "step", where + "."), where + ".step"));
    s->exp_avg(owned_copy(
        read.tensor(read.field(slot, "exp_avg", where + "."), where + ".exp_avg", param.sizes())
            .to(param.device()),
        taken));
    s->exp_avg_sq(owned_copy(read.tensor(read.field(slot, "exp_avg_sq", where + "."),
                                         where + ".exp_avg_sq", param.sizes())
                                 .to(param.device()),
                             taken));
    states.emplace_back(state_key(param), std::move(s));
  }

  // Everything checked: now change the model and optimizer.
  torch::NoGradGuard no_grad;
  for (auto& [target, source] : copies) {
    target.copy_(source);
  }
  optimizer.state().clear();
  for (auto& [key, s] : states) {
    optimizer.state()[key] = std::move(s);
  }
  return position;
}

}  // namespace ddprun::train
