#include "live_state.hpp"

#include "crc32.hpp"

namespace ddprun::train {

LiveState gather_live_state(GptImpl& model, FusedAdamW& optimizer, const LivePosition& position,
                            LossScaler* scaler) {
  optimizer.sync_step_counts();
  LiveState state;
  for (const auto& p : model.parameters()) {
    state.tensors.push_back(p);
  }
  for (const auto& b : model.buffers()) {
    state.tensors.push_back(b);
  }
  std::vector<double> counts;
  std::vector<double> hyperparameters;
  for (auto& group : optimizer.param_groups()) {
    for (const auto& param : group.params()) {
      auto& s = optimizer.param_state(param);
      state.tensors.push_back(s.exp_avg());
      state.tensors.push_back(s.exp_avg_sq());
      counts.push_back(static_cast<double>(s.step()));
    }
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    hyperparameters.push_back(options.lr());
    hyperparameters.push_back(options.weight_decay());
  }
  if (scaler != nullptr) {
    for (const auto& t : scaler->state_tensors()) {
      state.tensors.push_back(t);
    }
  }
  const auto device = model.parameters().front().device();
  const auto doubles = torch::TensorOptions().dtype(torch::kDouble);
  state.step_counts = torch::tensor(counts, doubles).to(device);
  state.hyperparameters = torch::tensor(hyperparameters, doubles).to(device);
  state.position = torch::tensor({position.finished_epoch, position.steps_into_epoch,
                                  position.samples_into_epoch, position.steps_committed},
                                 torch::TensorOptions().dtype(torch::kLong))
                       .to(device);
  return state;
}

LivePosition apply_live_state(const LiveState& state, FusedAdamW& optimizer) {
  const auto counts = state.step_counts.cpu();
  const auto hyperparameters = state.hyperparameters.cpu();
  const auto position = state.position.cpu();
  const auto* count = counts.data_ptr<double>();
  const auto* hyper = hyperparameters.data_ptr<double>();
  size_t k = 0;
  size_t g = 0;
  for (auto& group : optimizer.param_groups()) {
    for (const auto& param : group.params()) {
      optimizer.param_state(param).step(static_cast<int64_t>(count[k++]));
    }
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    options.lr(hyper[2 * g]).weight_decay(hyper[2 * g + 1]);
    ++g;
  }
  optimizer.forget_step_counts();
  const auto* p = position.data_ptr<int64_t>();
  return {p[0], p[1], p[2], p[3]};
}

uint32_t parameter_checksum(const GptImpl& model) {
  uint32_t crc = 0;
  for (const auto& p : model.parameters()) {
    const auto bytes = p.detach().to(torch::kCPU).contiguous();
    crc = crc32(bytes.data_ptr(), static_cast<size_t>(bytes.nbytes()), crc);
  }
  return crc;
}

}  // namespace ddprun::train
