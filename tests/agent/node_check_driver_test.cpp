// NodeCheckDriver with real child processes on an Asio loop: the user's command killed at its
// timeout, a folder that cannot be written, and the GPU query against a stand-in nvidia-smi on
// PATH (the environment names GPUs, as on a GPU node), answering well and badly.
#include "agent/node_check/node_check_driver.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

using namespace ddprun::agent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

class TempFolder {
 public:
  TempFolder() {
    std::string templ = (fs::temp_directory_path() / "ddprun_node_check_XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path_ = templ;
  }
  ~TempFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// Runs one check to its answer (bounded) and returns it.
ddprun::rendezvous::round::NodeChecked run_check(const AgentConfig& config, const EnvMap& env) {
  boost::asio::io_context io;
  std::optional<ddprun::rendezvous::round::NodeChecked> answer;
  NodeCheckDriver driver(io, config, env, [&](auto checked) { answer = std::move(checked); });
  driver.start();
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (!answer && std::chrono::steady_clock::now() < give_up)
    io.run_one_for(100ms);
  REQUIRE(answer);
  return *answer;
}

// A stand-in nvidia-smi in folder that prints `output` and exits with `status`.
void fake_nvidia_smi(const TempFolder& folder, const std::string& output, int status) {
  const std::string path = folder / "nvidia-smi";
  std::ofstream(path) << "#!/bin/sh\nprintf '" << output << "'\nexit " << status << "\n";
  ::chmod(path.c_str(), 0755);
}

}  // namespace

TEST_CASE("node check driver: the command passes, fails with its output, or is killed") {
  TempFolder tmp;
  const EnvMap env{{"PATH", "/usr/bin:/bin"}, {"TMPDIR", tmp.path()}};
  AgentConfig config;
  config.node_check.command = "echo fine";
  CHECK(run_check(config, env).passed);

  config.node_check.command = "echo one; echo two >&2; echo three; exit 4";
  auto failed = run_check(config, env);
  CHECK_FALSE(failed.passed);
  CHECK(failed.reason == "health check command: exit status 4: one | two | three");

  config.node_check.command = "echo started; exec sleep 60";
  config.node_check.timeout = ddprun::common::Seconds(0.3);
  const auto started = std::chrono::steady_clock::now();
  failed = run_check(config, env);
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  CHECK(failed.reason ==
        "health check command: still running after 0.3 s (--health-check-timeout), killed: "
        "started");
  // Its output folder is gone with it.
  CHECK(fs::is_empty(tmp.path()));
}

TEST_CASE("node check driver: a folder that cannot take a file fails before any command") {
  TempFolder tmp;
  const EnvMap env{{"PATH", "/usr/bin:/bin"}, {"TMPDIR", tmp.path()}};
  AgentConfig config;
  config.node_check.command = "touch " + (tmp / "ran");
  config.logs.log_dir = tmp / "file/logs";
  std::ofstream(tmp / "file") << "a file, not a folder";
  const auto failed = run_check(config, env);
  CHECK_FALSE(failed.passed);
  CHECK_THAT(failed.reason, Catch::StartsWith("folder " + (tmp / "file/logs") + ": cannot create"));
  CHECK_FALSE(fs::exists(tmp / "ran"));

  config.logs.log_dir = tmp / "logs";  // created as the agent would
  CHECK(run_check(config, env).passed);
  CHECK(fs::exists(tmp / "ran"));
}

TEST_CASE("node check driver: every GPU CUDA_VISIBLE_DEVICES names must answer nvidia-smi") {
  TempFolder tmp;
  const EnvMap env{{"PATH", tmp.path() + ":/usr/bin:/bin"},
                   {"TMPDIR", tmp.path()},
                   {"CUDA_VISIBLE_DEVICES", "0,1"}};
  AgentConfig config;
  config.node_check.command = "true";

  fake_nvidia_smi(tmp, "0, NVIDIA H100\\n1, NVIDIA H100\\n", 0);
  CHECK(run_check(config, env).passed);

  fake_nvidia_smi(tmp, "0, NVIDIA H100\\n", 0);
  auto failed = run_check(config, env);
  CHECK(failed.reason ==
        "GPU check: GPU 1 (CUDA_VISIBLE_DEVICES) does not answer: 1 GPU(s) listed by nvidia-smi");

  fake_nvidia_smi(tmp, "Unable to determine the device handle for GPU 0000:3B:00.0\\n", 9);
  failed = run_check(config, env);
  CHECK(failed.reason ==
        "GPU check (nvidia-smi): exit status 9: Unable to determine the device "
        "handle for GPU 0000:3B:00.0");

  // Both fail: both are named.
  config.node_check.command = "echo 'disk bad'; exit 3";
  failed = run_check(config, env);
  CHECK(failed.reason ==
        "health check command: exit status 3: disk bad; GPU check (nvidia-smi): exit status 9: "
        "Unable to determine the device handle for GPU 0000:3B:00.0");

  // The workers see no GPU: none is asked for.
  config.node_check.command = "true";
  EnvMap no_gpus = env;
  no_gpus["CUDA_VISIBLE_DEVICES"] = "";
  CHECK(run_check(config, no_gpus).passed);
}
