#include "zip_directory.hpp"

#include <algorithm>
#include <optional>

namespace ddprun::train {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kEntrySignature = 0x02014b50;
constexpr uint64_t kEndBytes = 22;
constexpr uint64_t kMaxCommentBytes = 0xFFFF;
constexpr uint64_t kZip64LocatorBytes = 20;
constexpr uint64_t kZip64EndBytes = 56;
constexpr uint64_t kEntryFixedBytes = 46;

uint64_t little_endian(const char* p, size_t width) {
  uint64_t value = 0;
  for (size_t k = width; k-- > 0;) {
    value = (value << 8) | static_cast<unsigned char>(p[k]);
  }
  return value;
}

[[noreturn]] void fail(const std::string& what) {
  throw ZipDirectoryError(what);
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(uint64_t file_size, const ReadAt& read_at) {
  if (file_size < kEndBytes) {
    fail("the file is too short to be a zip archive");
  }
  // The end record is the last thing in the file, followed only by its comment.
  const uint64_t tail_size = std::min(file_size, kEndBytes + kMaxCommentBytes);
  const uint64_t tail_start = file_size - tail_size;
  std::string tail(tail_size, '\0');
  read_at(tail_start, tail.data(), tail.size());
  std::optional<uint64_t> end_at;
  for (uint64_t k = tail_size - kEndBytes + 1; k-- > 0;) {
    const char* p = tail.data() + k;
    if (little_endian(p, 4) == kEndSignature &&
        k + kEndBytes + little_endian(p + 20, 2) == tail_size) {
      end_at = k;
      break;
    }
  }
  if (!end_at) {
    fail("the zip archive has no end record (the file was cut short)");
  }
  const char* end = tail.data() + *end_at;
  const uint64_t end_offset = tail_start + *end_at;
  uint64_t entries = little_endian(end + 10, 2);
  uint64_t directory_size = little_endian(end + 12, 4);
  uint64_t directory_offset = little_endian(end + 16, 4);
  uint64_t directory_end_limit = end_offset;
  if (entries == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    if (end_offset < kZip64LocatorBytes) {
      fail("the zip archive's zip64 locator is missing");
    }
    char locator[kZip64LocatorBytes];
    read_at(end_offset - kZip64LocatorBytes, locator, sizeof locator);
    const uint64_t zip64_end = little_endian(locator + 8, 8);
    if (little_endian(locator, 4) != kZip64LocatorSignature ||
        zip64_end > end_offset - kZip64LocatorBytes ||
        end_offset - kZip64LocatorBytes - zip64_end < kZip64EndBytes) {
      fail("the zip archive's zip64 locator is damaged");
    }
    char record[kZip64EndBytes];
    read_at(zip64_end, record, sizeof record);
    if (little_endian(record, 4) != kZip64EndSignature) {
      fail("the zip archive's zip64 end record is damaged");
    }
    entries = little_endian(record + 32, 8);
    directory_size = little_endian(record + 40, 8);
    directory_offset = little_endian(record + 48, 8);
    directory_end_limit = zip64_end;
  }
  if (directory_offset > directory_end_limit ||
      directory_size > directory_end_limit - directory_offset) {
    fail("the zip archive's directory lies outside the file (damaged or cut short)");
  }
  if (directory_size > kMaxZipDirectoryBytes || entries > kMaxZipEntries) {
    fail("the zip archive's directory has " + std::to_string(entries) + " entries in " +
         std::to_string(directory_size) + " bytes, more than a snapshot can have");
  }
  std::string directory(directory_size, '\0');
  read_at(directory_offset, directory.data(), directory.size());
  std::vector<ZipEntry> out;
  uint64_t pos = 0;
  for (uint64_t k = 0; k < entries; ++k) {
    if (directory_size - pos < kEntryFixedBytes ||
        little_endian(directory.data() + pos, 4) != kEntrySignature) {
      fail("the zip archive's directory entry " + std::to_string(k) + " is damaged");
    }
    const char* e = directory.data() + pos;
    const uint64_t name_bytes = little_endian(e + 28, 2);
    const uint64_t variable_bytes =
        name_bytes + little_endian(e + 30, 2) + little_endian(e + 32, 2);
    if (directory_size - pos - kEntryFixedBytes < variable_bytes) {
      fail("the zip archive's directory entry " + std::to_string(k) + " runs past the directory");
    }
    out.push_back({std::string(e + kEntryFixedBytes, name_bytes),
                   static_cast<uint32_t>(little_endian(e + 16, 4))});
    pos += kEntryFixedBytes + variable_bytes;
  }
  return out;
}

}  // namespace ddprun::train
