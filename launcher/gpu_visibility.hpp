#pragma once
// Which GPUs CUDA would show a worker: the pure half of `--nproc-per-node gpu`, so the rule is
// tested without a GPU. The count of physical GPUs comes from probe_host().

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

// The entries of a CUDA_VISIBLE_DEVICES value, split at commas, blanks around each trimmed. A
// trailing comma adds no entry; an empty one between commas stays (and ends CUDA's list).
std::vector<std::string_view> cuda_visible_entries(std::string_view value);

// How many of `physical` GPUs CUDA would show given CUDA_VISIBLE_DEVICES (unset: all).
// Follows CUDA's rule: the list is read up to the first entry that is not a valid index or a
// GPU-/MIG- UUID; duplicates end the list too.
int visible_gpu_count(int physical, const std::optional<std::string>& cuda_visible_devices);

}  // namespace ddprun::launcher
