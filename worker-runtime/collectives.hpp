#pragma once
// The process group the trainer talks through: a c10d TCPStore (a client of the agent's store
// under PyTorch's "/worker/attempt_<restart>" prefix, or hosted by rank 0) and ProcessGroupGloo on
// CPU or ProcessGroupNCCL on cuda:LOCAL_RANK. A world of one needs neither and runs no collectives.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "run_environment.hpp"

namespace c10d {
class Store;
class Work;
#if TORCH_VERSION_MAJOR >= 2
class Backend;
#else
class ProcessGroup;
#endif
}  // namespace c10d

namespace ddprun::train {

#if TORCH_VERSION_MAJOR >= 2
using CollectiveBackend = c10d::Backend;  // ProcessGroupGloo/NCCL derive from Backend since 2.0
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

class Collectives {
 public:
  // Connects to (or hosts) the store and builds the backend; throws std::runtime_error naming the
  // store address on failure.
  explicit Collectives(const RunEnvironment& env);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  torch::Device device() const { return device_; }

  // Sum over ranks, asynchronously; the result lands in `tensor` once the work completes.
  c10::intrusive_ptr<c10d::Work> start_allreduce_sum(torch::Tensor& tensor);
  void wait(const c10::intrusive_ptr<c10d::Work>& work);
  void allreduce_sum(torch::Tensor& tensor);  // synchronous
  void allreduce_max(torch::Tensor& tensor);
  // Overwrites every tensor with rank 0's values (coalesced into one flat transfer).
  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors);
  void barrier();

 private:
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
  torch::Device device_{torch::kCPU};
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<CollectiveBackend> backend_;
};

}  // namespace ddprun::train
