#include "agent/stacks/stack_capture_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "agent/workers/forked_child.hpp"

namespace ddprun::agent {

namespace {

// Everything the child needs, prepared before fork: between fork and exec only
// async-signal-safe calls are allowed (the agent has other threads).
struct ToolImage {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::string exec_error_prefix;
};

ToolImage build_image(const CaptureCommand& command) {
  ToolImage image;
  image.storage = command.argv;
  for (std::string& arg : image.storage)
    image.argv.push_back(arg.data());
  image.argv.push_back(nullptr);
  image.exec_error_prefix = "ddprun: cannot execute " + command.argv.front() + ": ";
  return image;
}

[[noreturn]] void run_tool(const ToolImage& image, char* const* envp, int output_fd,
                           int dev_null_fd, pid_t parent) {
  ::setpgid(0, 0);
  die_with_agent(parent);
  sigset_t empty;
  ::sigemptyset(&empty);
  restore_signals(empty);
  ::dup2(dev_null_fd, STDIN_FILENO);
  ::dup2(output_fd, STDOUT_FILENO);
  ::dup2(output_fd, STDERR_FILENO);
  close_descriptors_from(3);
  ::execve(image.argv.front(), image.argv.data(), envp);
  exit_with_reason(image.exec_error_prefix, errno);
}

std::string describe_end(StackCaptureRunner::CommandEnd end, int wait_status,
                         const std::string& error, std::chrono::milliseconds timeout) {
  using End = StackCaptureRunner::CommandEnd;
  switch (end) {
    case End::kExited:
      if (WIFEXITED(wait_status))
        return "exit status " + std::to_string(WEXITSTATUS(wait_status));
      return "killed by signal " + std::to_string(WTERMSIG(wait_status));
    case End::kTimedOut:
      return "killed after its " + std::to_string(timeout.count()) + " ms timeout";
    case End::kNotStarted:
      return "not started: " + error;
    case End::kCancelled:
      return "cancelled";
    case End::kPending:
      break;
  }
  return "pending";
}

}  // namespace

bool StackCaptureRunner::CommandResult::succeeded() const {
  return end == CommandEnd::kExited && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

StackCaptureRunner::StackCaptureRunner(const StackCapturePlan& plan, const EnvMap& tool_env,
                                       TimePoint now) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_)
    throw std::runtime_error(std::string("stack capture: epoll_create1 failed: ") +
                             std::strerror(errno));
  dev_null_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null_)
    throw std::runtime_error(std::string("stack capture: cannot open /dev/null: ") +
                             std::strerror(errno));
  for (const auto& [name, value] : tool_env) {
    if (name != "DEBUGINFOD_URLS")
      env_storage_.push_back(name + "=" + value);
  }
  for (std::string& entry : env_storage_)
    envp_.push_back(entry.data());
  envp_.push_back(nullptr);

  std::error_code error;
  std::filesystem::create_directories(plan.stacks_dir, error);
  if (error)
    throw std::runtime_error("stack capture: cannot create " + plan.stacks_dir + ": " +
                             error.message());
  for (const TargetCapturePlan& target : plan.targets) {
    TargetResult result{target.target, target.output_path, {}};
    for (const CaptureCommand& command : target.commands)
      result.commands.push_back(CommandResult{command, CommandEnd::kPending, 0, {}});
    TargetState state;
    state.output.reset(::open(target.output_path.c_str(),
                              O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
    if (!state.output)
      throw std::runtime_error("stack capture: cannot create " + target.output_path + ": " +
                               std::strerror(errno));
    results_.push_back(std::move(result));
    states_.push_back(std::move(state));
  }
  for (std::size_t i = 0; i < states_.size(); ++i)
    start_next(i, now);
}

StackCaptureRunner::~StackCaptureRunner() {
  cancel();
}

void StackCaptureRunner::append(std::size_t index, const std::string& line) {
  const std::string text = line + "\n";
  write_all_raw(states_[index].output.get(), text);
}

void StackCaptureRunner::record_end(std::size_t index, std::size_t command, CommandEnd end,
                                    int wait_status, std::string error) {
  CommandResult& result = results_[index].commands[command];
  result.end = end;
  result.wait_status = wait_status;
  result.error = std::move(error);
  append(index, std::string(kStackSectionMarker) +
                    "end: " + describe_end(end, wait_status, result.error, result.command.timeout));
}

void StackCaptureRunner::start_next(std::size_t index, TimePoint now) {
  TargetState& state = states_[index];
  while (!state.running && state.next_command < results_[index].commands.size()) {
    const std::size_t command_index = state.next_command++;
    const CaptureCommand& command = results_[index].commands[command_index].command;
    append(index, stack_section_header(command));
    const ToolImage image = build_image(command);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      record_end(index, command_index, CommandEnd::kNotStarted, 0,
                 std::string("fork failed: ") + std::strerror(errno));
      continue;
    }
    if (pid == 0)
      run_tool(image, envp_.data(), state.output.get(), dev_null_.get(), parent);
    ::setpgid(pid, pid);  // also here, so a kill right away reaches the group
    OwnedFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = index;
    if (!pidfd || ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pidfd.get(), &event) != 0) {
      const std::string reason = std::string("watching the tool failed: ") + std::strerror(errno);
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
      record_end(index, command_index, CommandEnd::kNotStarted, status, reason);
      continue;
    }
    state.running = Running{pid, std::move(pidfd), now + command.timeout, false};
  }
}

void StackCaptureRunner::advance(TimePoint now) {
  for (std::size_t i = 0; i < states_.size(); ++i) {
    TargetState& state = states_[i];
    if (!state.running)
      continue;
    Running& running = *state.running;
    int status = 0;
    const pid_t reaped = ::waitpid(running.pid, &status, WNOHANG);
    if (reaped == running.pid) {
      const bool killed = running.killed;
      state.running.reset();  // closes the pidfd, which leaves the epoll set
      record_end(i, state.next_command - 1, killed ? CommandEnd::kTimedOut : CommandEnd::kExited,
                 status, {});
      start_next(i, now);
    } else if (!running.killed && now >= running.deadline) {
      ::kill(-running.pid, SIGKILL);
      ::kill(running.pid, SIGKILL);
      running.killed = true;  // its exit makes fd() readable
    }
  }
}

std::optional<StackCaptureRunner::TimePoint> StackCaptureRunner::next_deadline() const {
  std::optional<TimePoint> earliest;
  for (const TargetState& state : states_) {
    if (state.running && !state.running->killed &&
        (!earliest || state.running->deadline < *earliest))
      earliest = state.running->deadline;
  }
  return earliest;
}

bool StackCaptureRunner::done() const {
  for (std::size_t i = 0; i < states_.size(); ++i) {
    if (states_[i].running || states_[i].next_command < results_[i].commands.size())
      return false;
  }
  return true;
}

void StackCaptureRunner::cancel() {
  for (std::size_t i = 0; i < states_.size(); ++i) {
    TargetState& state = states_[i];
    if (state.running) {
      ::kill(-state.running->pid, SIGKILL);
      ::kill(state.running->pid, SIGKILL);
      int status = 0;
      while (::waitpid(state.running->pid, &status, 0) < 0 && errno == EINTR) {
      }
      state.running.reset();
      record_end(i, state.next_command - 1, CommandEnd::kCancelled, status, {});
    }
    while (state.next_command < results_[i].commands.size()) {
      const std::size_t command = state.next_command++;
      append(i, stack_section_header(results_[i].commands[command].command));
      record_end(i, command, CommandEnd::kCancelled, 0, {});
    }
  }
}

std::vector<StackCaptureRunner::TargetResult> capture_stacks(const StackCapturePlan& plan,
                                                             const EnvMap& tool_env,
                                                             std::chrono::milliseconds limit) {
  using Clock = StackCaptureRunner::Clock;
  const auto give_up = Clock::now() + limit;
  StackCaptureRunner runner(plan, tool_env, Clock::now());
  while (!runner.done()) {
    const auto now = Clock::now();
    if (now >= give_up)
      break;
    const auto wake = std::min(runner.next_deadline().value_or(give_up), give_up);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now);
    pollfd ready{runner.fd(), POLLIN, 0};
    ::poll(&ready, 1, static_cast<int>(std::max<long long>(0, wait.count())));
    runner.advance(Clock::now());
  }
  runner.cancel();
  return runner.results();
}

CapturedStacks read_captured_stacks(const StackCaptureRunner::TargetResult& result) {
  std::ifstream file(result.output_path, std::ios::binary);
  std::string text(kMaxStackFileBytesParsed, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(file.gcount()));
  return parse_stack_file(text, result.target.pid);
}

}  // namespace ddprun::agent
