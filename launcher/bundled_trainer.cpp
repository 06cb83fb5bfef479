#include "launcher/bundled_trainer.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "launcher/usage_error.hpp"

extern char** environ;

namespace ddprun::launcher {
namespace {

// The builder prints one path; more than this is not a path.
constexpr size_t kMaxBuilderOutput = 4096;

bool is_executable(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

bool is_file(const std::string& path) {
  return ::access(path.c_str(), R_OK) == 0;
}

// Closes a pipe end on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { close(); }
  int get() const { return fd_; }
  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

struct Captured {
  int status = 0;
  std::string out;
};

// Runs argv to its end, its stdout captured (at most kMaxBuilderOutput bytes kept) and its
// stderr this process's: the builder's progress reaches the user as it happens.
Captured run_capturing_stdout(const std::vector<std::string>& argv) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
  FileDescriptor read_end(fds[0]);
  FileDescriptor write_end(fds[1]);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  if (error != 0)
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  write_end.close();
  Captured captured;
  std::array<char, 1024> buffer{};
  while (true) {
    const ssize_t n = ::read(read_end.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    captured.out.append(buffer.data(),
                        std::min(static_cast<size_t>(n), kMaxBuilderOutput - captured.out.size()));
  }
  while (::waitpid(pid, &captured.status, 0) < 0) {
    if (errno != EINTR)
      throw std::runtime_error("waiting for " + argv[0] + ": " + std::strerror(errno));
  }
  return captured;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  return text;
}

}  // namespace

TrainerBuilder builder_for(const TrainerSearch& search, bool python_beside_ddprun) {
  TrainerBuilder builder;
  const std::string share = search.executable_dir + "/../share/ddprun";
  builder.script = share + "/build_against_torch.py";
  builder.source = share + "/trainer-source";
  if (search.python_exec && !search.python_exec->empty())
    builder.python = *search.python_exec;
  else if (python_beside_ddprun)
    builder.python = search.executable_dir + "/python3";
  else
    builder.python = search.python3_on_path.value_or("python3");
  return builder;
}

std::string provide_bundled_trainer(const TrainerSearch& search) {
  if (is_executable(search.beside_ddprun))
    return search.beside_ddprun;
  const TrainerBuilder builder =
      builder_for(search, is_executable(search.executable_dir + "/python3"));
  if (!is_file(builder.script)) {
    throw UsageError("train",
                     search.beside_ddprun + " is not installed, and there is no " + builder.script +
                         " to build it",
                     "ddprun-train beside ddprun (scripts/build.sh), or ddprun installed with "
                     "pip, which builds it against your torch (README: On a cluster, without "
                     "root)");
  }
  const Captured run =
      run_capturing_stdout({builder.python, builder.script, "--source", builder.source});
  if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0) {
    throw std::runtime_error("ddprun-train could not be provided for " + builder.python +
                             "'s torch (the reason is above); nothing was started");
  }
  const std::string path = trimmed(run.out);
  if (path.empty() || path.front() != '/' || path.find('\n') != std::string::npos ||
      !is_executable(path)) {
    throw std::runtime_error(builder.script + " printed no executable ddprun-train path (\"" +
                             path + "\"); nothing was started");
  }
  return path;
}

}  // namespace ddprun::launcher
