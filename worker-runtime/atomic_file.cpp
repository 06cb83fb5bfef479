#include "atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ddprun::train {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

// Owns a file descriptor and the temporary file's name until the rename commits it.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw io_error("cannot create", path_);
    }
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    if (!committed_) {
      ::unlink(path_.c_str());
    }
  }

  void write(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        throw io_error("cannot write", path_);
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
  }

  void commit(const std::string& target, const std::function<void()>& before_replace) {
    if (::fsync(fd_) != 0) {
      throw io_error("cannot fsync", path_);
    }
    if (::close(fd_) != 0) {
      fd_ = -1;
      throw io_error("cannot close", path_);
    }
    fd_ = -1;
    if (before_replace) {
      before_replace();
    }
    if (::rename(path_.c_str(), target.c_str()) != 0) {
      throw io_error("cannot rename onto", target);
    }
    committed_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

void fsync_directory(const std::string& path) {
  const auto parent = std::filesystem::absolute(path).parent_path();
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw io_error("cannot open folder", parent.string());
  }
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) {
    throw io_error("cannot fsync folder", parent.string());
  }
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(const ChunkWriter&)>& produce,
                           const std::function<void()>& before_replace) {
  TemporaryFile temporary(path + ".tmp." + std::to_string(::getpid()));
  produce([&](const char* data, size_t size) { temporary.write(data, size); });
  temporary.commit(path, before_replace);
  fsync_directory(path);
}

}  // namespace ddprun::train
