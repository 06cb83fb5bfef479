#include "launcher/child_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "agent/base/owned_fd.hpp"

extern char** environ;

namespace ddprun::launcher {
namespace {

// Spawn file actions, destroyed on every path out.
class SpawnActions {
 public:
  SpawnActions() { ::posix_spawn_file_actions_init(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  ~SpawnActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
};

// Reads `fd` to its end, keeping at most `limit` bytes.
std::string read_to_end(int fd, std::size_t limit) {
  std::string text;
  std::array<char, 1024> buffer{};
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return text;
    text.append(buffer.data(), std::min(static_cast<std::size_t>(n), limit - text.size()));
  }
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, std::size_t stdout_limit) {
  agent::OwnedFd read_end;
  agent::OwnedFd write_end;
  SpawnActions actions;
  if (stdout_limit > 0) {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
    read_end.reset(fds[0]);
    write_end.reset(fds[1]);
    ::posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);
  }
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = ::posix_spawnp(&pid, args[0], actions.get(), nullptr, args.data(), environ);
  if (error != 0)
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  ChildResult result;
  if (stdout_limit > 0) {
    write_end.reset();  // the child holds the only writer now: its exit ends the read
    result.out = read_to_end(read_end.get(), stdout_limit);
  }
  while (::waitpid(pid, &result.wait_status, 0) < 0) {
    if (errno != EINTR)
      throw std::runtime_error("waiting for " + argv[0] + ": " + std::strerror(errno));
  }
  return result;
}

}  // namespace ddprun::launcher
