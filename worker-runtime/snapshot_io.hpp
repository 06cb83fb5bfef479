#pragma once
// Snapshot files in torch.save's zip layout, written with an untagged pickle (no
// torch.jit._pickle globals), so Python's torch.load returns a plain dict — also under
// weights_only on PyTorch 2.x, which rejects torch::pickle_save's type tags. See
// shared/reference/mingpt_ddp.md §4.
#include <torch/torch.h>

#include <stdexcept>
#include <string>

namespace ddprun::train {

// A snapshot that cannot be used; the message names the file and the reason.
class SnapshotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Atomically replaces `path` (temporary file, fsync, rename, folder fsync).
void write_snapshot_file(const std::string& path, const c10::IValue& content);

// Reads a torch.save-style zip archive onto the CPU; throws SnapshotError for a file that is not
// one (corrupt, truncated, not a zip) or cannot be read.
c10::IValue read_snapshot_file(const std::string& path);

}  // namespace ddprun::train
