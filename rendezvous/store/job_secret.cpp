#include "rendezvous/store/job_secret.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/key_material.hpp"

namespace ddprun::rendezvous::store {
namespace {

// Enough for any secret a person or a script writes; a longer file is a mistake (a wrong path).
constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Closes the descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::optional<std::string> secret_file_mode_problem(mode_t mode) {
  if ((mode & (S_IRWXG | S_IRWXO)) == 0) {
    return std::nullopt;
  }
  return "mode " + octal_mode(mode) + " lets group or others read it";
}

std::string secret_from_text(std::string_view text, const std::string& where) {
  const auto end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) {
    throw JobSecretError(where, "the secret is empty");
  }
  const std::size_t length = end + 1;
  if (length < kMinSecretBytes) {
    throw JobSecretError(where, "the secret is " + std::to_string(length) +
                                    " bytes long (trailing blanks not counted); at least " +
                                    std::to_string(kMinSecretBytes) + " are needed");
  }
  return std::string(text.substr(0, length));
}

std::string read_secret_file(const std::string& path, const std::string& where) {
  const std::string named = where + " " + path;
  const FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (file.get() < 0) {
    throw JobSecretError(named, std::string("cannot open: ") + std::strerror(errno));
  }
  // The checks look at the file that was opened, not at whatever the path names a moment later.
  struct stat status{};
  if (::fstat(file.get(), &status) != 0) {
    throw JobSecretError(named, std::string("cannot stat: ") + std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) {
    throw JobSecretError(named, "not a regular file");
  }
  if (const auto problem = secret_file_mode_problem(status.st_mode)) {
    throw JobSecretError(named, *problem);
  }
  if (static_cast<std::size_t>(status.st_size) > kMaxSecretFileBytes) {
    throw JobSecretError(named, std::to_string(status.st_size) +
                                    " bytes is more than a secret (at most " +
                                    std::to_string(kMaxSecretFileBytes) + ")");
  }
  std::string text;
  const common::WipeOnExit wipe_text(text);
  try {
    text = common::read_key_file(file.get(), kMaxSecretFileBytes);
  } catch (const std::runtime_error& error) {
    throw JobSecretError(named, error.what());
  }
  return secret_from_text(text, named);
}

std::optional<JobSecret> resolve_job_secret(const std::optional<std::string>& file_option,
                                            const std::string& option_name,
                                            const std::optional<std::string>& file_variable,
                                            std::optional<std::string_view> secret_variable) {
  if (file_option) {
    return JobSecret{read_secret_file(*file_option, option_name),
                     "file " + *file_option + " (" + option_name + ")"};
  }
  if (file_variable) {
    return JobSecret{read_secret_file(*file_variable, kSecretFileVariable),
                     "file " + *file_variable + " (" + kSecretFileVariable + ")"};
  }
  if (secret_variable) {
    return JobSecret{secret_from_text(*secret_variable, kSecretVariable),
                     std::string("the environment (") + kSecretVariable + ")"};
  }
  return std::nullopt;
}

}  // namespace ddprun::rendezvous::store
