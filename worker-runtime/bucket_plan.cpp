#include "bucket_plan.hpp"

namespace ddprun::train {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& parameter_bytes,
                                              int64_t first_bucket_bytes, int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  int64_t current_bytes = 0;
  for (size_t k = parameter_bytes.size(); k-- > 0;) {
    current.push_back(k);
    current_bytes += parameter_bytes[k];
    const int64_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    if (current_bytes >= cap) {
      buckets.push_back(std::move(current));
      current = {};
      current_bytes = 0;
    }
  }
  if (!current.empty()) {
    buckets.push_back(std::move(current));
  }
  return buckets;
}

}  // namespace ddprun::train
