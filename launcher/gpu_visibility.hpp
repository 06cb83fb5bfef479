#pragma once
// Which GPUs CUDA would show a worker: the pure half of `--nproc-per-node gpu`, so the rule is
// tested without a GPU. The count of physical GPUs comes from probe_host().

#include <optional>
#include <string>

namespace ddprun::launcher {

// How many of `physical` GPUs CUDA would show given CUDA_VISIBLE_DEVICES (unset: all).
// Follows CUDA's rule: the list is read up to the first entry that is not a valid index or a
// GPU-/MIG- UUID; duplicates end the list too.
int visible_gpu_count(int physical, const std::optional<std::string>& cuda_visible_devices);

}  // namespace ddprun::launcher
