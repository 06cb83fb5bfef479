#pragma once
// The most memory this rank has held so far, for the epoch summary: the CUDA caching allocator's
// peak of allocated bytes on a GPU (torch.cuda.max_memory_allocated), the process's peak resident
// set on CPU (VmHWM).
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace ddprun::train {

struct MemoryPeak {
  int64_t bytes = 0;
  std::string kind;  // "GPU" or "RSS"
};

MemoryPeak memory_peak(const torch::Device& device);

}  // namespace ddprun::train
