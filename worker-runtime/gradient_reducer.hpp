#pragma once
// DistributedDataParallel's gradient synchronisation, done by hand because LibTorch has no C++
// DDP: gradients are packed into buckets (bucket_plan.hpp: reverse parameter order, 1 MiB first
// bucket, 25 MiB cap) and each bucket's allreduce starts as soon as all of its gradients have been
// produced during backward, always in bucket order so every rank issues the same sequence.
// finish() waits for them and writes the averaged gradients into param.grad().
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "collectives.hpp"

namespace ddprun::train {

class GradientReducer {
 public:
  GradientReducer(std::vector<torch::Tensor> parameters, Collectives& collectives);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Call before each backward pass.
  void prepare_for_backward();
  // Call after backward: launches what is left, waits, averages, sets .grad().
  void finish();

  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> parameters;
    std::vector<int64_t> offsets;
    torch::Tensor flat;
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
    bool launched = false;
  };

  void on_gradient(size_t parameter, const torch::Tensor& gradient);
  void launch_ready_buckets();

  std::vector<torch::Tensor> parameters_;
  Collectives& collectives_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter -> bucket
  std::vector<size_t> slot_of_;    // parameter -> position inside its bucket
  std::vector<bool> seen_;         // parameter's gradient arrived in this backward
  std::vector<unsigned> hook_ids_;
  size_t next_to_launch_ = 0;
  bool armed_ = false;
};

}  // namespace ddprun::train
