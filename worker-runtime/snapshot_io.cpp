#include "snapshot_io.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <filesystem>
#include <vector>

#include "atomic_file.hpp"

namespace ddprun::train {

void write_snapshot_file(const std::string& path, const c10::IValue& content) {
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
  write_file_atomically(path, [&](const ChunkWriter& write) {
    caffe2::serialize::PyTorchStreamWriter zip([&](const void* data, size_t size) {
      write(static_cast<const char*>(data), size);
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickle_bytes.data(), pickle_bytes.size(),
                                       pickler.tensorData(), zip);
    zip.writeEndOfFile();
  });
}

c10::IValue read_snapshot_file(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) {
    throw SnapshotError("snapshot " + path + ": cannot read: " + error.message());
  }
  if (size == 0) {
    throw SnapshotError("snapshot " + path + ": the file is empty (truncated?)");
  }
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    if (!zip.hasRecord("data.pkl")) {
      throw SnapshotError("snapshot " + path + ": no data.pkl record (not a torch.save file)");
    }
    return torch::jit::readArchiveAndTensors("data", "", "data/", c10::nullopt, c10::nullopt,
                                             torch::Device(torch::kCPU), zip);
  } catch (const SnapshotError&) {
    throw;
  } catch (const c10::Error& e) {
    throw SnapshotError("snapshot " + path +
                        ": corrupt or truncated: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw SnapshotError("snapshot " + path + ": corrupt or truncated: " + e.what());
  }
}

}  // namespace ddprun::train
