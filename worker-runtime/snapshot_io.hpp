#pragma once
// Snapshot files in torch.save's zip layout. Writing: LibTorch's Pickler without type tags (no
// torch.jit._pickle globals), so Python's torch.load returns a plain dict, also under
// weights_only on PyTorch 2.x, plus ddprun-train's exact-resume record beside data.pkl (see
// resume_record.hpp), which torch.load ignores. Reading: any torch.save file of a state-dict
// snapshot, from PyTorch 1.6 on, through our bounded unpickler (torch_pickle_reader.hpp), because
// LibTorch's own unpickler cannot read collections.OrderedDict (minGPT-ddp's model_state). Every
// record read is checked against the CRC-32 in the zip's directory (zip_directory.hpp), which
// neither LibTorch nor Python's torch.load does.
//
// Error policy: every unusable file throws SnapshotError, whose message names the file and says
// what is wrong with it (empty, not a zip archive, truncated, a record missing or corrupt, a
// pickle that is not a state dict, ...).
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddprun::train {

// A snapshot that cannot be used; the message names the file and the reason.
class SnapshotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SnapshotFile {
  c10::IValue content;                       // what torch.load returns
  std::optional<std::string> resume_record;  // ours, when ddprun-train wrote the file
};

// Atomically replaces `path` (temporary file, fsync, rename, folder fsync) with `content` and
// the resume record; `before_replace` as in write_file_atomically (atomic_file.hpp).
void write_snapshot_file(const std::string& path, const c10::IValue& content,
                         std::string_view resume_record,
                         const std::function<void()>& before_replace = {});

// Reads a torch.save zip archive onto the CPU.
SnapshotFile read_snapshot_file(const std::string& path);

}  // namespace ddprun::train
