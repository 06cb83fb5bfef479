#include "agent/node_check/node_check_driver.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/node_check/node_check_probe.hpp"

namespace ddprun::agent {

namespace {

using End = StackCaptureRunner::CommandEnd;

// How much of a check's output is read: its last lines are what the failure quotes.
constexpr std::streamoff kOutputTailBytes = 64 * 1024;
constexpr std::size_t kQuotedLines = 3;

std::string make_work_dir(const EnvMap& env) {
  auto tmp = env.find("TMPDIR");
  std::string base = tmp != env.end() && !tmp->second.empty() ? tmp->second : "/tmp";
  std::string templ = (std::filesystem::path(base) / "ddprun-node-check-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr)
    throw std::runtime_error("cannot create a folder under " + base + ": " + std::strerror(errno));
  return templ;
}

// The last kOutputTailBytes of a check's output, without the runner's marker lines.
std::string output_tail(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = file ? static_cast<std::streamoff>(file.tellg()) : 0;
  const std::streamoff start = size > kOutputTailBytes ? size - kOutputTailBytes : 0;
  std::string text(static_cast<std::size_t>(size - start), '\0');
  file.seekg(start);
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(file.gcount(), 0)));
  std::string kept;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line(text.data() + at, end - at);
    if (!line.starts_with(kStackSectionMarker))
      kept.append(line).push_back('\n');
    at = end + 1;
  }
  return kept;
}

std::string how_it_ended(const StackCaptureRunner::CommandResult& result, common::Seconds timeout) {
  switch (result.end) {
    case End::kExited:
      if (WIFEXITED(result.wait_status))
        return "exit status " + std::to_string(WEXITSTATUS(result.wait_status));
      return "killed by signal " + std::to_string(WTERMSIG(result.wait_status));
    case End::kTimedOut:
      return "still running after " + common::seconds_text(timeout) +
             " s (--health-check-timeout), killed";
    case End::kNotStarted:
      return "not started: " + result.error;
    case End::kCancelled:
    case End::kPending:
      break;
  }
  return "cancelled";
}

// "<what>: <how it ended>[: <its last lines>]" for a command that did not succeed.
std::string command_failure(const std::string& what, const StackCaptureRunner::TargetResult& target,
                            common::Seconds timeout) {
  std::string text = what + ": " + how_it_ended(target.commands.front(), timeout);
  const std::string lines = last_output_lines(output_tail(target.output_path), kQuotedLines);
  return lines.empty() ? text : text + ": " + lines;
}

CaptureCommand bounded(std::vector<std::string> argv, common::Seconds timeout) {
  return CaptureCommand{StackKind::kNative, std::move(argv),
                        std::chrono::duration_cast<std::chrono::milliseconds>(timeout)};
}

}  // namespace

NodeCheckDriver::NodeCheckDriver(boost::asio::io_context& io, const AgentConfig& config,
                                 const EnvMap& env, Answer answer)
    : io_(io), config_(config), env_(env), answer_(std::move(answer)) {}

NodeCheckDriver::~NodeCheckDriver() {
  clear();
}

void NodeCheckDriver::clear() {
  run_.reset();  // kills and reaps what still runs
  if (!work_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(work_dir_, ignored);
    work_dir_.clear();
  }
  gpus_.reset();
}

void NodeCheckDriver::start() {
  clear();
  const NodeCheckPlan plan =
      plan_node_checks(config_.node_check, config_.workers, config_.logs, probe_gpu_facts(env_));
  for (const std::string& folder : plan.folders) {
    if (auto problem = folder_problem(folder, kMinFreeBytes)) {
      answer_({false, "folder " + folder + ": " + *problem});
      return;
    }
  }
  const common::Seconds timeout = config_.node_check.timeout;
  try {
    work_dir_ = make_work_dir(env_);
    StackCapturePlan runs;
    runs.stacks_dir = work_dir_;
    runs.targets.push_back(TargetCapturePlan{
        {}, work_dir_ + "/command.txt", {bounded({"/bin/sh", "-c", plan.command}, timeout)}});
    if (plan.gpus) {
      gpus_ = plan.gpus;
      runs.targets.push_back(
          TargetCapturePlan{{}, work_dir_ + "/gpus.txt", {bounded(plan.gpus->argv, timeout)}});
    }
    run_ = std::make_unique<CaptureRun>(
        io_, runs, env_, [this](CaptureRun::Results results) { finish(std::move(results)); });
  } catch (const std::exception& error) {
    clear();
    answer_({false, std::string("cannot run the checks: ") + error.what()});
    return;
  }
  run_->begin();
}

void NodeCheckDriver::finish(CaptureRun::Results results) {
  const common::Seconds timeout = config_.node_check.timeout;
  std::string problems;
  auto add = [&](const std::string& problem) {
    problems += (problems.empty() ? "" : "; ") + problem;
  };
  if (!results[0].commands.front().succeeded())
    add(command_failure("health check command", results[0], timeout));
  if (gpus_ && results.size() > 1) {
    const auto& gpu_run = results[1];
    if (!gpu_run.commands.front().succeeded()) {
      add(command_failure("GPU check (nvidia-smi)", gpu_run, timeout));
    } else {
      if (auto problem = gpu_query_problem(output_tail(gpu_run.output_path), *gpus_))
        add("GPU check: " + *problem);
    }
  }
  clear();
  answer_({problems.empty(), problems});
}

}  // namespace ddprun::agent
