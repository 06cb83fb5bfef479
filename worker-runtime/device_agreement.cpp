#include "device_agreement.hpp"

namespace ddprun::train {

std::optional<std::string> device_disagreement(int64_t gpu_ranks, int64_t world_size,
                                               const RankDevice& self) {
  if (gpu_ranks == 0 || gpu_ranks == world_size) {
    return std::nullopt;
  }
  const std::string this_rank = self.has_gpu()
                                    ? "this rank trains on cuda:" + std::to_string(self.local_rank)
                                    : "this rank, LOCAL_RANK " + std::to_string(self.local_rank) +
                                          ", sees " + std::to_string(self.visible_gpus) +
                                          " CUDA device(s) and would train on CPU";
  return "only " + std::to_string(gpu_ranks) + " of " + std::to_string(world_size) +
         " ranks have a GPU of their own (cuda:LOCAL_RANK), and NCCL ranks and Gloo ranks would "
         "wait for each other: " +
         this_rank +
         ". Start at most as many workers per node as it has GPUs (--nproc-per-node gpu), or hide "
         "the GPUs on every node (CUDA_VISIBLE_DEVICES=) to train on CPU";
}

}  // namespace ddprun::train
