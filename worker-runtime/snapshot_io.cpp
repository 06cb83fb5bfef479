#include "snapshot_io.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "atomic_file.hpp"
#include "crc32.hpp"
#include "resume_record.hpp"
#include "torch_pickle_reader.hpp"
#include "zip_directory.hpp"

namespace ddprun::train {
namespace {

constexpr std::array<char, 4> kZipLocalHeader{'P', 'K', '\x03', '\x04'};
constexpr size_t kMaxStorageKeyBytes = 64;

// LibTorch's messages carry a C++ backtrace on later lines; the first line is the reason.
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

class ArchiveReader {
 public:
  explicit ArchiveReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw SnapshotError("snapshot " + path_ + ": " + what);
  }

  SnapshotFile read() {
    check_file();
    read_checksums();
    std::optional<caffe2::serialize::PyTorchStreamReader> zip;
    try {
      zip.emplace(path_);
    } catch (const c10::Error& e) {
      fail("not a readable zip archive: " + first_line(e.what_without_backtrace()));
    }
    if (!zip->hasRecord("data.pkl")) {
      fail("the zip archive has no data.pkl record, so torch.save did not write it");
    }
    if (zip->hasRecord("byteorder")) {
      const auto order = record_text(*zip, "byteorder", 16);
      if (order != "little") {
        fail("written with byte order '" + order + "'; only little-endian snapshots are read");
      }
    }
    const auto pickle = record_text(*zip, "data.pkl", kMaxPickleBytes);
    SnapshotFile file;
    try {
      file.content = read_torch_pickle(
          pickle, [&](const StorageRequest& request) { return load_storage(*zip, request); });
    } catch (const PickleError& e) {
      fail(std::string("data.pkl: ") + e.what());
    } catch (const c10::Error& e) {
      fail("data.pkl: " + first_line(e.what_without_backtrace()));
    }
    if (zip->hasRecord(std::string(kResumeRecordName))) {
      file.resume_record = record_text(*zip, std::string(kResumeRecordName), kMaxResumeRecordBytes);
    }
    return file;
  }

 private:
  void check_file() const {
    std::error_code error;
    const auto size = std::filesystem::file_size(path_, error);
    if (error) {
      fail("cannot read: " + error.message());
    }
    if (size == 0) {
      fail("the file is empty (truncated?)");
    }
    std::array<char, kZipLocalHeader.size()> head{};
    std::ifstream in(path_, std::ios::binary);
    if (!in) {
      fail("cannot open it for reading");
    }
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    if (in.gcount() != static_cast<std::streamsize>(head.size()) || head != kZipLocalHeader) {
      fail(
          "not a zip archive, so not a torch.save file (torch.save has written zip archives "
          "since PyTorch 1.6; the older format is not read)");
    }
  }

  // Each record's CRC-32 from the zip's directory, by its name inside the archive's folder (the
  // names PyTorchStreamReader takes).
  void read_checksums() {
    std::ifstream in(path_, std::ios::binary);
    const auto size = std::filesystem::file_size(path_);
    std::vector<ZipEntry> entries;
    try {
      entries = read_zip_directory(size, [&](uint64_t offset, char* destination, size_t n) {
        in.seekg(static_cast<std::streamoff>(offset));
        in.read(destination, static_cast<std::streamsize>(n));
        if (in.gcount() != static_cast<std::streamsize>(n)) {
          throw ZipDirectoryError("the file cannot be read at byte " + std::to_string(offset));
        }
      });
    } catch (const ZipDirectoryError& e) {
      fail(e.what());
    }
    for (const auto& entry : entries) {
      const auto slash = entry.name.find('/');
      checksums_[slash == std::string::npos ? entry.name : entry.name.substr(slash + 1)] =
          entry.crc32;
    }
  }

  // Reads a whole record of at most `limit` bytes; `what` names it in messages.
  std::string record_text(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name,
                          size_t limit) const {
    const size_t size = record_size(zip, name);
    if (size > limit) {
      fail("record " + name + " is " + std::to_string(size) + " bytes, more than the " +
           std::to_string(limit) + " it can be");
    }
    std::string text(size, '\0');
    read_record(zip, name, text.data(), size);
    return text;
  }

  size_t record_size(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name) const {
    try {
      return zip.getRecordSize(name);
    } catch (const c10::Error& e) {
      fail("record " + name + " cannot be read: " + first_line(e.what_without_backtrace()));
    }
  }

  void read_record(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name,
                   void* destination, size_t size) const {
    try {
      zip.getRecord(name, destination, size);
    } catch (const c10::Error& e) {
      fail("record " + name + " is corrupt: " + first_line(e.what_without_backtrace()));
    }
    const auto expected = checksums_.find(name);
    if (expected == checksums_.end()) {
      fail("record " + name + " is not in the zip archive's directory (corrupt)");
    }
    const uint32_t actual = crc32(destination, size);
    if (actual != expected->second) {
      char text[64];
      std::snprintf(text, sizeof text, "CRC-32 %08x where the archive says %08x", actual,
                    expected->second);
      fail("record " + name + " is corrupt: its bytes have " + text +
           " (damaged on disk or in transfer)");
    }
  }

  torch::Tensor load_storage(caffe2::serialize::PyTorchStreamReader& zip,
                             const StorageRequest& request) const {
    const auto& key = request.key;
    const bool plain_key = !key.empty() && key.size() <= kMaxStorageKeyBytes &&
                           std::all_of(key.begin(), key.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
                           });
    if (!plain_key) {
      throw PickleError("a tensor's storage key is not a short plain name");
    }
    const std::string name = "data/" + key;
    if (!zip.hasRecord(name)) {
      fail("record " + name + " is missing (a tensor's data; the archive is incomplete)");
    }
    const size_t element = c10::elementSize(request.dtype);
    const size_t size = record_size(zip, name);
    size_t needed = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(request.numel), element, &needed) ||
        size != needed) {
      fail("record " + name + " holds " + std::to_string(size) +
           " bytes, but data.pkl says it is " + std::to_string(request.numel) + " elements of " +
           std::to_string(element) + " bytes (corrupt)");
    }
    auto flat = torch::empty({request.numel}, torch::TensorOptions().dtype(request.dtype));
    if (size > 0) {
      read_record(zip, name, flat.data_ptr(), size);
    }
    return flat;
  }

  std::string path_;
  std::map<std::string, uint32_t> checksums_;
};

}  // namespace

void write_snapshot_file(const std::string& path, const c10::IValue& content,
                         std::string_view resume_record,
                         const std::function<void()>& before_replace) {
  std::vector<char> pickle_bytes;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) {
        pickle_bytes.insert(pickle_bytes.end(), data, data + size);
      },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(content);
  pickler.stop();
  write_file_atomically(
      path,
      [&](const ChunkWriter& write) {
        caffe2::serialize::PyTorchStreamWriter zip([&](const void* data, size_t size) {
          write(static_cast<const char*>(data), size);
          return size;
        });
        torch::jit::writeArchiveAndTensors("data", pickle_bytes.data(), pickle_bytes.size(),
                                           pickler.tensorData(), zip);
        zip.writeRecord(std::string(kResumeRecordName), resume_record.data(), resume_record.size());
        zip.writeEndOfFile();
      },
      before_replace);
}

SnapshotFile read_snapshot_file(const std::string& path) {
  return ArchiveReader(path).read();
}

}  // namespace ddprun::train
