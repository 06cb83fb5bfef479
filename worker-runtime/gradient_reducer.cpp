#include "gradient_reducer.hpp"

#include <stdexcept>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "bucket_plan.hpp"

namespace ddprun::train {

GradientReducer::GradientReducer(std::vector<torch::Tensor> parameters, Collectives& collectives)
    : parameters_(std::move(parameters)), collectives_(collectives) {
  std::vector<int64_t> bytes;
  bytes.reserve(parameters_.size());
  for (const auto& p : parameters_) {
    bytes.push_back(p.numel() * static_cast<int64_t>(p.element_size()));
  }
  bucket_of_.resize(parameters_.size());
  slot_of_.resize(parameters_.size());
  seen_.assign(parameters_.size(), false);
  for (auto& members : plan_buckets(bytes)) {
    Bucket bucket;
    int64_t numel = 0;
    for (size_t slot = 0; slot < members.size(); ++slot) {
      bucket_of_[members[slot]] = buckets_.size();
      slot_of_[members[slot]] = slot;
      bucket.offsets.push_back(numel);
      numel += parameters_[members[slot]].numel();
    }
    bucket.parameters = std::move(members);
    bucket.flat = torch::zeros({numel}, parameters_.front().options().requires_grad(false));
    buckets_.push_back(std::move(bucket));
  }
  // A tensor hook on a leaf fires with that parameter's finished gradient during backward.
  hook_ids_.reserve(parameters_.size());
  for (size_t k = 0; k < parameters_.size(); ++k) {
    hook_ids_.push_back(
        parameters_[k].register_hook([this, k](const torch::Tensor& g) { on_gradient(k, g); }));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < parameters_.size(); ++k) {
    parameters_[k].remove_hook(hook_ids_[k]);
  }
}

void GradientReducer::prepare_for_backward() {
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.parameters.size();
    bucket.work = {};
    bucket.launched = false;
  }
  seen_.assign(parameters_.size(), false);
  next_to_launch_ = 0;
  armed_ = true;
}

void GradientReducer::on_gradient(size_t parameter, const torch::Tensor& gradient) {
  if (!armed_) {
    return;  // a backward outside training (none today) would simply stay local
  }
  if (seen_[parameter]) {
    throw std::logic_error("gradient of one parameter produced twice in a backward pass");
  }
  seen_[parameter] = true;
  auto& bucket = buckets_[bucket_of_[parameter]];
  const auto offset = bucket.offsets[slot_of_[parameter]];
  bucket.flat.narrow(0, offset, gradient.numel()).copy_(gradient.reshape({-1}));
  --bucket.pending;
  launch_ready_buckets();
}

void GradientReducer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    auto& bucket = buckets_[next_to_launch_];
    bucket.work = collectives_.start_allreduce_sum(bucket.flat);
    bucket.launched = true;
    ++next_to_launch_;
  }
}

void GradientReducer::finish() {
  if (!armed_) {
    throw std::logic_error("GradientReducer::finish without prepare_for_backward");
  }
  armed_ = false;
  for (size_t k = 0; k < parameters_.size(); ++k) {
    if (!seen_[k]) {
      // Every minGPT parameter takes part in the loss; a missing one means ranks would diverge.
      throw std::logic_error("a parameter received no gradient in this backward pass");
    }
  }
  launch_ready_buckets();
  const double scale = 1.0 / static_cast<double>(collectives_.world_size());
  torch::NoGradGuard no_grad;
  for (auto& bucket : buckets_) {
    collectives_.wait(bucket.work);
    bucket.flat.mul_(scale);
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      auto& p = parameters_[bucket.parameters[slot]];
      const auto averaged = bucket.flat.narrow(0, bucket.offsets[slot], p.numel()).view(p.sizes());
      p.mutable_grad().copy_(averaged);
    }
  }
}

}  // namespace ddprun::train
