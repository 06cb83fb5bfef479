#pragma once

namespace ddprun::train {

// Makes glibc's malloc keep the memory of freed tensors for reuse instead of handing it back
// to the kernel after every step. Training frees and re-allocates the same few-MiB activation
// and gradient buffers on every step; by default glibc serves those with mmap and returns them
// with munmap, so every step page-faults its working set in afresh (more than a third of a
// step on this project's 2-core virtual machines). Does nothing when the user tunes malloc
// through GLIBC_TUNABLES. Call before the first large allocation.
void keep_freed_memory_for_reuse();

}  // namespace ddprun::train
