#pragma once
// Replaces a file so that a crash at any instant leaves either the old or the new content whole:
// write `<path>.tmp.<pid>`, fsync it, rename over `path`, fsync the folder.
#include <cstddef>
#include <functional>
#include <string>

namespace ddprun::train {

using ChunkWriter = std::function<void(const char* data, size_t size)>;

// `produce` writes the content through the ChunkWriter it is given; if it throws, the temporary
// file is removed and `path` is untouched. `before_replace`, when given, runs once the new content
// is on disk and before it replaces `path` (the snapshots keep the old one under another name
// there). Throws std::runtime_error naming the file on I/O errors.
void write_file_atomically(const std::string& path,
                           const std::function<void(const ChunkWriter&)>& produce,
                           const std::function<void()>& before_replace = {});

}  // namespace ddprun::train
