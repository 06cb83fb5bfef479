#pragma once
// Waits for a file to appear, through inotify on its folder: the tests react the moment a
// trainer publishes its snapshot (written to a temporary name, then renamed into place).

#include <chrono>
#include <filesystem>

namespace ddprun::slurm_test {

// True once `path` exists; false at the deadline. The folder must exist.
bool wait_for_path(const std::filesystem::path& path, std::chrono::milliseconds timeout);

}  // namespace ddprun::slurm_test
