#pragma once
// Test helper: a file of the given contents and mode in a fresh private directory, both
// removed with it (a job secret file, or one a check must refuse).

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ddprun::rendezvous::store::testing {

class SecretFile {
 public:
  SecretFile(const std::string& contents, mode_t mode) {
    char pattern[] = "/tmp/ddprun-secret-test-XXXXXX";
    const char* dir = ::mkdtemp(pattern);
    dir_ = dir ? dir : "/tmp";
    path_ = dir_ + "/secret";
    std::ofstream(path_) << contents;
    ::chmod(path_.c_str(), mode);
  }
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  ~SecretFile() {
    std::remove(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace ddprun::rendezvous::store::testing
