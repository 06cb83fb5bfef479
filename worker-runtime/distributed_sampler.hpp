#pragma once
// torch.utils.data.DistributedSampler's index arithmetic (drop_last=False): the epoch's shuffled
// order is padded by repeating its head up to a multiple of the world size, then rank r takes
// every world_size-th index starting at r. The shuffle itself (a permutation seeded with
// seed + epoch) is computed by the caller so this stays pure.
#include <cstdint>
#include <vector>

namespace ddprun::train {

int64_t samples_per_rank(int64_t dataset_size, int64_t world_size);

// `epoch_order` holds positions into the dataset; returns this rank's positions in order.
std::vector<int64_t> rank_positions(const std::vector<int64_t>& epoch_order, int64_t world_size,
                                    int64_t rank);

// How many batches of `batch_size` a rank runs per epoch (the last one may be partial), capped
// by `step_cap` when it is positive.
int64_t batches_per_epoch(int64_t samples_per_rank, int64_t batch_size, int64_t step_cap);

}  // namespace ddprun::train
