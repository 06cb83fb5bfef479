// load_etcd_password: the password file's permissions and contents, or the environment.

#include "launcher/etcd_password.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/key_material.hpp"
#include "launcher/usage_error.hpp"

namespace ddprun::launcher {
namespace {

using rendezvous::backends::etcd::kEtcdPasswordEnv;

constexpr std::size_t kMaxPasswordBytes = 4096;
constexpr const char* kExpected =
    "rdzv_conf password_file=PATH to a file of mode 0600 (or 0400) holding the etcd user's "
    "password, or the environment variable DDPRUN_ETCD_PASSWORD";

// Closes the descriptor on every path out.
class OpenFile {
 public:
  explicit OpenFile(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)) {}
  ~OpenFile() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string read_password_file(const std::string& path) {
  const std::string option = "--rdzv_conf password_file";
  const OpenFile file(path);
  struct ::stat info{};
  // The checks look at the file that was opened, not at whatever the path names a moment later.
  if (file.fd() < 0 || ::fstat(file.fd(), &info) != 0) {
    throw UsageError(option, "cannot read '" + path + "': " + std::strerror(errno), kExpected);
  }
  if (!S_ISREG(info.st_mode)) {
    throw UsageError(option, "'" + path + "' is not a regular file", kExpected);
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw UsageError(option, "'" + path + "' can be read by group or others (run chmod 600 on it)",
                     kExpected);
  }
  if (info.st_size > static_cast<::off_t>(kMaxPasswordBytes)) {
    throw UsageError(option, "'" + path + "' is larger than a password", kExpected);
  }
  std::string password;
  try {
    password = common::read_key_file(file.fd(), kMaxPasswordBytes);
  } catch (const std::runtime_error& error) {
    throw UsageError(option, "cannot read '" + path + "': " + error.what(), kExpected);
  }
  // One line, as `echo secret > file` writes it.
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  return password;
}

}  // namespace

void load_etcd_password(LaunchConfig& config, const Environment& env) {
  if (!config.etcd || !config.etcd->auth.enabled()) {
    return;
  }
  auto& auth = config.etcd->auth;
  if (!auth.password_file.empty()) {
    auth.password = read_password_file(auth.password_file);
  } else if (const auto from_env = env.find(std::string(kEtcdPasswordEnv)); from_env != env.end()) {
    auth.password = from_env->second;  // no temporary copy: the launcher wipes the original
  } else {
    throw UsageError("--rdzv_conf user",
                     "etcd user '" + auth.user + "' has no password: no password_file and " +
                         std::string(kEtcdPasswordEnv) + " is not set",
                     kExpected);
  }
  if (auth.password.empty()) {
    throw UsageError(
        auth.password_file.empty() ? std::string(kEtcdPasswordEnv) : "--rdzv_conf password_file",
        "the etcd password is empty", kExpected);
  }
}

}  // namespace ddprun::launcher
