#pragma once
// Replaces a file so that a crash at any instant leaves either the old or the new content whole:
// write `<path>.tmp.<pid>`, fsync it, rename over `path`, fsync the folder.
#include <cstddef>
#include <functional>
#include <string>

namespace ddprun::train {

using ChunkWriter = std::function<void(const char* data, size_t size)>;

// `produce` writes the content through the ChunkWriter it is given; if it throws, the temporary
// file is removed and `path` is untouched. Throws std::runtime_error naming the file on I/O errors.
void write_file_atomically(const std::string& path,
                           const std::function<void(const ChunkWriter&)>& produce);

}  // namespace ddprun::train
