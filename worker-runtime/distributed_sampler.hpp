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

// The same epoch as a cursor over its order, so that the world may change between steps (live
// recovery): a step of world W takes the next positions from `cursor`, rank r every W-th from
// cursor + r, as many per rank as a batch holds or, at the epoch's end, as the rest needs
// (positions past the order wrap to its head, PyTorch's padding). Then cursor += share * W.
// With one world for the whole epoch this is rank_positions' batches exactly; after a change
// no position is taken twice or left out before the padding.
// How many samples each rank takes in the step at `cursor` (0: the epoch is over).
int64_t step_share(int64_t order_size, int64_t cursor, int64_t world_size, int64_t batch_size);
// This rank's positions (into `epoch_order`'s values) for the step at `cursor`.
std::vector<int64_t> step_positions(const std::vector<int64_t>& epoch_order, int64_t cursor,
                                    int64_t world_size, int64_t rank, int64_t batch_size);
// Steps left from `cursor` while the world stays `world_size`.
int64_t steps_left_in_epoch(int64_t order_size, int64_t cursor, int64_t world_size,
                            int64_t batch_size);

}  // namespace ddprun::train
