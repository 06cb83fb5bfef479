#pragma once
// Whether the ranks of one job agree on the kind of device they train on. Each rank picks NCCL
// when it has a GPU of its own (cuda:LOCAL_RANK) and Gloo on CPU otherwise, so a node with fewer
// GPUs than workers, or a job across GPU and CPU nodes, would mix the two: NCCL ranks and Gloo
// ranks then wait for each other until a timeout of minutes. The ranks count the GPU ranks
// through the store first, and every rank refuses a mixed world at once. Pure: no store here.
#include <cstdint>
#include <optional>
#include <string>

namespace ddprun::train {

struct RankDevice {
  int64_t local_rank = 0;
  int64_t visible_gpus = 0;  // CUDA devices this rank sees (0: none, or a CPU-only LibTorch)
  bool has_gpu() const { return local_rank < visible_gpus; }
};

// The message to fail with when only some of world_size ranks have a GPU (gpu_ranks of them),
// worded for this rank; nothing when all or none do.
std::optional<std::string> device_disagreement(int64_t gpu_ranks, int64_t world_size,
                                               const RankDevice& self);

}  // namespace ddprun::train
