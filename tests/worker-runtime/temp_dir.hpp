#pragma once
// A fresh folder for one test's files, removed with everything in it when the test ends. The pid
// in its name keeps test processes that run at once apart.

#include <unistd.h>

#include <filesystem>
#include <string>

namespace ddprun::test {

struct TempDir {
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("ddprun-train-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }

  std::filesystem::path path;
};

}  // namespace ddprun::test
