#pragma once
// One StackCaptureRunner driven on the event loop: it advances when a tool exits (the runner's
// descriptor) and when the runner's next deadline passes, and hands the results over once every
// command has ended. The hang watchdog's captures and the node checks run their commands
// through it.
//
// Threading: the io_context's thread only.

#include <functional>
#include <memory>
#include <vector>

#include "agent/base/descriptor_wait.hpp"
#include "agent/base/env_map.hpp"
#include "agent/stacks/stack_capture_runner.hpp"

namespace ddprun::agent {

class CaptureRun {
 public:
  using Results = std::vector<StackCaptureRunner::TargetResult>;
  // Called once, with every target's results; it may destroy this CaptureRun.
  using Done = std::function<void(Results)>;

  // Starts the plan's first commands; throws what StackCaptureRunner throws. Destroying it
  // kills and reaps what still runs, and `done` is not called then.
  CaptureRun(boost::asio::io_context& io, const StackCapturePlan& plan, const EnvMap& tool_env,
             Done done);
  CaptureRun(CaptureRun&&) = delete;  // its completions hold `this`

  // Begins the waits; a plan whose commands all ended already is done before this returns.
  void begin();
  // Kills what still runs and finishes now (`done` with what was captured so far).
  void cancel();

 private:
  void watch();
  void advance();
  void finish();

  std::unique_ptr<StackCaptureRunner> runner_;  // null once finished (its completions then return)
  std::unique_ptr<Descriptor> runner_fd_;
  boost::asio::steady_timer deadline_;
  Done done_;
  // Completions hold a weak reference: one that runs after `done` destroyed this does nothing.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace ddprun::agent
