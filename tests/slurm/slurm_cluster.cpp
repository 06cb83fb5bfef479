#include "slurm_cluster.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ddprun::slurm_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartTimeout = seconds(60);
constexpr auto kStopTimeout = seconds(90);
constexpr auto kClientTimeout = seconds(30);

std::filesystem::path make_lab_dir() {
  // Short and under /tmp: munged's socket path must stay below the 108-byte sun_path limit.
  std::string pattern = "/tmp/ddprun-slurm.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + " failed");
  }
  return pattern;
}

// The value of "Key=" in a `scontrol show job -o` line.
std::string field(const std::string& line, const std::string& key) {
  const std::string needle = " " + key + "=";
  const auto at = line.find(needle);
  if (at == std::string::npos) {
    return "";
  }
  const auto begin = at + needle.size();
  return line.substr(begin, line.find_first_of(" \n", begin) - begin);
}

bool is_final_state(const std::string& state) {
  return !state.empty() && state != "PENDING" && state != "RUNNING" && state != "CONFIGURING" &&
         state != "COMPLETING" && state != "SUSPENDED" && state != "REQUEUED" &&
         state != "RESIZING" && state != "SIGNALING" && state != "STAGE_OUT";
}

}  // namespace

std::filesystem::path ddprun_binary() {
  return std::filesystem::path(DDPRUN_BIN_DIR) / "ddprun";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

SlurmCluster::SlurmCluster()
    : script_(std::filesystem::path(DDPRUN_SOURCE_DIR) / "tests" / "slurm" / "cluster.sh"),
      lab_dir_(make_lab_dir()) {
  const auto started = run_command(
      {script_.string(), "start", lab_dir_.string(), "--owner", std::to_string(::getpid())},
      kStartTimeout);
  if (started.exit_status != 0) {
    run_command({script_.string(), "stop", lab_dir_.string()}, kStopTimeout);
    throw std::runtime_error("the Slurm test cluster did not start:\n" + started.output +
                             log_tail());
  }
}

SlurmCluster::~SlurmCluster() {
  try {
    run_command({script_.string(), "stop", lab_dir_.string()}, kStopTimeout);
    if (std::getenv("DDPRUN_SLURM_KEEP") == nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(lab_dir_, ignored);
    }
  } catch (...) {
    // A destructor must not throw; the watchdog still stops the cluster when we exit.
  }
}

CommandResult SlurmCluster::client(const std::vector<std::string>& args,
                                   milliseconds timeout) const {
  std::vector<std::string> argv = {script_.string(), "exec", lab_dir_.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, timeout);
}

CommandResult SlurmCluster::on_node(const std::string& node, const std::vector<std::string>& args,
                                    milliseconds timeout) const {
  std::vector<std::string> argv = {script_.string(), "node-exec", lab_dir_.string(), node};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, timeout);
}

std::vector<int> SlurmCluster::node_pids(const std::string& node) const {
  const auto listed =
      run_command({script_.string(), "node-pids", lab_dir_.string(), node}, kClientTimeout);
  std::vector<int> pids;
  std::istringstream words(listed.output);
  int pid = 0;
  while (words >> pid) {
    pids.push_back(pid);
  }
  return pids;
}

std::string SlurmCluster::submit(const std::vector<std::string>& sbatch_args) const {
  std::vector<std::string> args = {"sbatch", "--parsable"};
  args.insert(args.end(), sbatch_args.begin(), sbatch_args.end());
  const auto submitted = client(args, kClientTimeout);
  std::string id = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  if (submitted.exit_status != 0 || id.empty() ||
      id.find_first_not_of("0123456789") != std::string::npos) {
    throw std::runtime_error("sbatch refused the job:\n" + submitted.output);
  }
  return id;
}

std::string SlurmCluster::job_state(const std::string& job_id) const {
  const auto shown = client({"scontrol", "show", "job", "-o", job_id}, kClientTimeout);
  return field(" " + shown.output, "JobState");
}

std::optional<JobOutcome> SlurmCluster::wait_for_job_end(const std::string& job_id,
                                                         milliseconds timeout) const {
  // Slurm offers no completion event to a client (sbatch --wait polls too, at 2-10 s), so
  // poll the controller at a short interval until the deadline.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto shown = client({"scontrol", "show", "job", "-o", job_id}, kClientTimeout);
    const std::string line = " " + shown.output;
    const std::string state = field(line, "JobState");
    if (is_final_state(state)) {
      return JobOutcome{state, field(line, "ExitCode"), shown.output};
    }
    ::usleep(200'000);
  }
  return std::nullopt;
}

std::string SlurmCluster::log_tail() const {
  std::string tail;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(lab_dir_ / "log", ignored)) {
    const std::string text = read_file(entry.path());
    const auto cut = text.size() > 3000 ? text.size() - 3000 : 0;
    tail += "---- " + entry.path().string() + "\n" + text.substr(cut);
  }
  return tail;
}

}  // namespace ddprun::slurm_test
