#pragma once
// DDP's gradient bucket assignment (c10d::compute_bucket_assignment_by_size for dense tensors of
// one dtype): walk the parameters in reverse order, close a bucket once it reaches its cap (so it
// may overshoot by one tensor); the first bucket's cap is small so the first allreduce starts
// early.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddprun::train {

inline constexpr int64_t kFirstBucketBytes = 1 << 20;  // DDP's _DEFAULT_FIRST_BUCKET_BYTES
inline constexpr int64_t kBucketBytes = 25 << 20;      // DDP's bucket_cap_mb=25

// Returns, for each bucket in launch order, the parameter indices it holds.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& parameter_bytes,
                                              int64_t first_bucket_bytes = kFirstBucketBytes,
                                              int64_t bucket_bytes = kBucketBytes);

}  // namespace ddprun::train
