#include "distributed_sampler.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddprun::train {

int64_t samples_per_rank(int64_t dataset_size, int64_t world_size) {
  return (dataset_size + world_size - 1) / world_size;
}

std::vector<int64_t> rank_positions(const std::vector<int64_t>& epoch_order, int64_t world_size,
                                    int64_t rank) {
  if (epoch_order.empty() || world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("rank_positions: empty order or rank outside the world");
  }
  const auto size = static_cast<int64_t>(epoch_order.size());
  const int64_t per_rank = samples_per_rank(size, world_size);
  const int64_t total = per_rank * world_size;
  std::vector<int64_t> padded = epoch_order;
  // PyTorch repeats the whole order as often as needed when padding exceeds the dataset.
  while (static_cast<int64_t>(padded.size()) < total) {
    const auto missing = total - static_cast<int64_t>(padded.size());
    const auto take = std::min(missing, size);
    padded.insert(padded.end(), epoch_order.begin(), epoch_order.begin() + take);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t k = rank; k < total; k += world_size) {
    mine.push_back(padded[static_cast<size_t>(k)]);
  }
  return mine;
}

int64_t batches_per_epoch(int64_t samples_per_rank, int64_t batch_size, int64_t step_cap) {
  const int64_t full = (samples_per_rank + batch_size - 1) / batch_size;
  return step_cap > 0 && step_cap < full ? step_cap : full;
}

int64_t step_share(int64_t order_size, int64_t cursor, int64_t world_size, int64_t batch_size) {
  if (cursor >= order_size) {
    return 0;
  }
  return std::min(batch_size, samples_per_rank(order_size - cursor, world_size));
}

std::vector<int64_t> step_positions(const std::vector<int64_t>& epoch_order, int64_t cursor,
                                    int64_t world_size, int64_t rank, int64_t batch_size) {
  if (epoch_order.empty() || world_size < 1 || rank < 0 || rank >= world_size || cursor < 0) {
    throw std::invalid_argument(
        "step_positions: empty order, rank outside the world or cursor < 0");
  }
  const auto size = static_cast<int64_t>(epoch_order.size());
  const int64_t share = step_share(size, cursor, world_size, batch_size);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(share));
  for (int64_t j = 0; j < share; ++j) {
    mine.push_back(epoch_order[static_cast<size_t>((cursor + rank + j * world_size) % size)]);
  }
  return mine;
}

int64_t steps_left_in_epoch(int64_t order_size, int64_t cursor, int64_t world_size,
                            int64_t batch_size) {
  if (cursor >= order_size) {
    return 0;
  }
  const int64_t per_step = batch_size * world_size;
  return (order_size - cursor + per_step - 1) / per_step;
}

}  // namespace ddprun::train
