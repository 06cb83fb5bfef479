#include "agent/workers/worker_process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "agent/base/heartbeat_channel.hpp"
#include "agent/workers/forked_child.hpp"

namespace ddprun::agent {

namespace {

// Everything the child touches after fork is prepared here: between fork and exec only
// async-signal-safe calls are allowed (the agent has other threads).
struct CpuSetDeleter {
  void operator()(cpu_set_t* set) const { CPU_FREE(set); }
};

struct ExecImage {
  std::string program;
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string exec_error_prefix;
  std::unique_ptr<cpu_set_t, CpuSetDeleter> cpus;  // null: no binding
  std::size_t cpus_size = 0;
  std::string bind_error_prefix;
};

void prepare_cpu_set(const std::vector<int>& cpus, ExecImage& image) {
  if (cpus.empty())
    return;
  int highest = 0;
  for (int cpu : cpus) {
    if (cpu < 0)
      throw std::runtime_error("negative CPU number " + std::to_string(cpu));
    highest = std::max(highest, cpu);
  }
  image.cpus.reset(CPU_ALLOC(highest + 1));
  if (!image.cpus)
    throw std::runtime_error("cannot allocate a CPU set");
  image.cpus_size = CPU_ALLOC_SIZE(highest + 1);
  CPU_ZERO_S(image.cpus_size, image.cpus.get());
  for (int cpu : cpus)
    CPU_SET_S(static_cast<std::size_t>(cpu), image.cpus_size, image.cpus.get());
  image.bind_error_prefix = "ddprun: cannot bind the worker to its CPUs (--numa-binding): ";
}

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
  prepare_cpu_set(command.cpu_affinity, image);
  return image;
}

[[noreturn]] void run_child(const ExecImage& image, const WorkerCommand& command,
                            const sigset_t& child_mask, pid_t agent_pid) {
  ::setsid();
  die_with_agent(agent_pid);
  if (command.stdout_fd >= 0)
    ::dup2(command.stdout_fd, STDOUT_FILENO);
  if (command.stderr_fd >= 0)
    ::dup2(command.stderr_fd, STDERR_FILENO);
  restore_signals(child_mask);
  unsigned first_to_close = 3;
  if (command.heartbeat_fd >= 0) {
    const int after = HeartbeatChannel::install_in_child(command.heartbeat_fd);
    if (after < 0)
      exit_with_reason("ddprun: cannot pass the heartbeat pipe to the worker: ", errno);
    first_to_close = static_cast<unsigned>(after);
  }
  close_descriptors_from(first_to_close);
  // Threads the worker starts later inherit the binding, as under numactl --physcpubind.
  if (image.cpus && ::sched_setaffinity(0, image.cpus_size, image.cpus.get()) != 0)
    exit_with_reason(image.bind_error_prefix, errno);
  ::execve(image.program.c_str(), image.argv.data(), image.envp.data());
  exit_with_reason(image.exec_error_prefix, errno);
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
