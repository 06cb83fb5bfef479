#pragma once
// Runs the node checks (node_check_plan.hpp) on the agent's event loop when the round machine
// asks before a join, and answers with the outcome. The folders are checked in-process (a file
// created and removed, statvfs); the GPU query and the user's command run in parallel as child
// processes through StackCaptureRunner (pidfds, each killed at --health-check-timeout and then
// failed), their output in a private temporary folder, removed after each check, of which only
// the last 64 KiB are read; nothing here blocks the loop for longer than a folder check.
//
// Threading: the io_context's thread only.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agent/base/agent_config.hpp"
#include "agent/node_check/node_check_plan.hpp"
#include "agent/stacks/capture_run.hpp"
#include "agent/workers/worker_env.hpp"
#include "rendezvous/round/machine_io.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

class NodeCheckDriver {
 public:
  using Answer = std::function<void(rendezvous::round::NodeChecked)>;

  // config, workers, logs and env must outlive the driver. answer: called from a completion on
  // io (or from inside start() when no command has to run), once per start().
  NodeCheckDriver(boost::asio::io_context& io, const AgentConfig& config, const EnvMap& env,
                  Answer answer);
  ~NodeCheckDriver();
  NodeCheckDriver(const NodeCheckDriver&) = delete;
  NodeCheckDriver& operator=(const NodeCheckDriver&) = delete;

  // Starts a check (a check still running is cancelled first).
  void start();

 private:
  void finish(CaptureRun::Results results);
  void clear();

  boost::asio::io_context& io_;
  const AgentConfig& config_;
  const EnvMap& env_;
  Answer answer_;
  std::optional<GpuCheck> gpus_;     // the running check's GPU query, for its output's meaning
  std::string work_dir_;             // the running check's output folder
  std::unique_ptr<CaptureRun> run_;  // the running check's commands
};

}  // namespace ddprun::agent
