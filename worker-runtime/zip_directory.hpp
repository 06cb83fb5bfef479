#pragma once
// The central directory of a zip archive: each record's name and CRC-32. LibTorch's
// PyTorchStreamReader (like Python's torch.load) reads records without checking their CRC-32, so
// a snapshot with damaged bytes would load silently; snapshot_io checks every record it reads
// against this directory. Pure: the caller supplies the bytes at the offsets asked for.
// Handles zip64 (archives over 4 GiB); every offset, size and count is checked against the file.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun::train {

class ZipDirectoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ZipEntry {
  std::string name;  // full name inside the archive, e.g. "archive/data/0"
  uint32_t crc32 = 0;
};

// Named limits: a snapshot has a few hundred records; these are far beyond any real one.
inline constexpr uint64_t kMaxZipDirectoryBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxZipEntries = uint64_t{1} << 20;

// Fills `size` bytes from `offset` (always inside the file) or throws.
using ReadAt = std::function<void(uint64_t offset, char* destination, size_t size)>;

// Throws ZipDirectoryError naming what is missing or inconsistent.
std::vector<ZipEntry> read_zip_directory(uint64_t file_size, const ReadAt& read_at);

}  // namespace ddprun::train
