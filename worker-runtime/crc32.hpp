#pragma once
// CRC-32 as zip archives use it (IEEE 802.3, reflected, polynomial 0xEDB88320): the check a
// snapshot's records are read against. Our own, so that the trainer needs no zlib: it builds
// against a user's torch with nothing from the system but a C++ compiler (README: "On a
// cluster, without root").

#include <cstddef>
#include <cstdint>

namespace ddprun::train {

// The CRC-32 of `size` bytes at `data`, continuing from `crc` (the value of the bytes before
// them; 0 to start).
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace ddprun::train
