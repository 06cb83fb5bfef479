#include "heap_tuning.hpp"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace ddprun::train {
namespace {

// glibc's largest accepted mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): blocks up to
// this size come from the heap, and only larger ones are mapped on their own.
constexpr int kMmapThresholdBytes = 32 * 1024 * 1024;
// Free memory at the top of the heap is returned only above this; a trainer's peak is its
// steady state, so what it freed is soon needed again.
constexpr int kTrimThresholdBytes = 1024 * 1024 * 1024;

}  // namespace

void keep_freed_memory_for_reuse() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr &&
      std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) {
    return;
  }
  // Both are needed: a fixed trim threshold alone also freezes the mmap threshold at its
  // 128 KiB default, which maps (and faults in) even more blocks.
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes);
}

}  // namespace ddprun::train
