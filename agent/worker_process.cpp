#include "agent/worker_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddprun::agent {

namespace {

// Everything the child touches after fork is prepared here: between fork and exec only
// async-signal-safe calls are allowed (the agent has other threads).
struct ExecImage {
  std::string program;
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string exec_error_prefix;
};

ExecImage build_image(const WorkerCommand& command) {
  ExecImage image;
  image.program = resolve_program(command.argv.at(0), command.env);
  image.storage.reserve(command.argv.size() + command.env.size());
  for (const auto& arg : command.argv)
    image.storage.push_back(arg);
  const std::size_t argc = image.storage.size();
  for (const auto& [name, value] : command.env)
    image.storage.push_back(name + "=" + value);
  for (std::size_t i = 0; i < image.storage.size(); ++i) {
    (i < argc ? image.argv : image.envp).push_back(image.storage[i].data());
  }
  image.argv.push_back(nullptr);
  image.envp.push_back(nullptr);
  image.exec_error_prefix = "ddprun: cannot execute " + image.program + ": ";
  return image;
}

void write_all_raw(int fd, const char* text, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, text, size);
    if (n <= 0)
      return;
    text += n;
    size -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void run_child(const ExecImage& image, const WorkerCommand& command,
                            const sigset_t& child_mask, pid_t agent_pid) {
  ::setsid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The agent may have died between fork and prctl: then nobody would kill us later.
  if (::getppid() != agent_pid)
    ::_exit(1);
  if (command.stdout_fd >= 0)
    ::dup2(command.stdout_fd, STDOUT_FILENO);
  if (command.stderr_fd >= 0)
    ::dup2(command.stderr_fd, STDERR_FILENO);
  // Ignored dispositions survive exec; the agent ignores SIGPIPE, the worker must not.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &default_action, nullptr);
  ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
  ::close_range(3, ~0U, 0);  // the agent's sockets and pipes are not the worker's
  ::execve(image.program.c_str(), image.argv.data(), image.envp.data());
  const int exec_errno = errno;
  write_all_raw(STDERR_FILENO, image.exec_error_prefix.data(), image.exec_error_prefix.size());
  const char* reason = ::strerror(exec_errno);
  write_all_raw(STDERR_FILENO, reason, std::strlen(reason));
  write_all_raw(STDERR_FILENO, "\n", 1);
  ::_exit(127);
}

}  // namespace

std::string resolve_program(const std::string& argv0, const EnvMap& env) {
  if (argv0.find('/') != std::string::npos)
    return argv0;
  auto path_it = env.find("PATH");
  const std::string path = path_it == env.end() ? "/usr/local/bin:/usr/bin:/bin" : path_it->second;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos)
      end = path.size();
    // An empty PATH entry means the current directory.
    std::string candidate = end > start ? path.substr(start, end - start) : std::string(1, '.');
    candidate.append(1, '/').append(argv0);
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return argv0;
}

pid_t spawn_worker(const WorkerCommand& command, const sigset_t& child_mask) {
  if (command.argv.empty())
    throw std::runtime_error("the worker command is empty");
  const ExecImage image = build_image(command);
  const pid_t agent_pid = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0)
    run_child(image, command, child_mask, agent_pid);
  return pid;
}

bool signal_worker_group(pid_t pid, int sig) {
  if (::killpg(pid, sig) == 0)
    return true;
  return ::kill(pid, sig) == 0;
}

}  // namespace ddprun::agent
