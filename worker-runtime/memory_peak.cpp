#include "memory_peak.hpp"

#include <sys/resource.h>
// As in collectives.cpp: USE_C10D_NCCL marks a CUDA LibTorch, the only one with a CUDA allocator.
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace ddprun::train {

MemoryPeak memory_peak(const torch::Device& device) {
#ifdef USE_C10D_NCCL
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {stats.allocated_bytes[aggregate].peak, "GPU"};
  }
#endif
  (void)device;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {static_cast<int64_t>(usage.ru_maxrss) * 1024, "RSS"};  // ru_maxrss is in KiB
}

}  // namespace ddprun::train
