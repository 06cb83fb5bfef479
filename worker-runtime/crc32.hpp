#pragma once
// CRC-32 as zip archives use it (reflected polynomial 0xEDB88320), slice-by-8. Pure.
#include <cstddef>
#include <cstdint>

namespace ddprun::train {

// Continues `crc` (0 to start) over `size` bytes.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

}  // namespace ddprun::train
