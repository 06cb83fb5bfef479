#pragma once
// torchrun's file timer (TORCHELASTIC_ENABLE_FILE_TIMER=1) in the agent's event loop: per group
// start, the FileTimerServer the agent's environment asks for, a wait on its FIFO and one on its
// next deadline. Expired scopes go to the hang handler as HungRanks; acting on them is
// HangResponder's part.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "agent/base/descriptor_wait.hpp"
#include "agent/watchdog/file_timer/file_timer_server.hpp"
#include "agent/watchdog/hang/hang_report.hpp"
#include "agent/workers/worker_env.hpp"
#include "agent/workers/worker_group.hpp"

namespace ddprun::agent {

class FileTimerDriver {
 public:
  using HungHandler = std::function<void(std::vector<HungRank>)>;
  // before_print: ends the console's open lines before a warning.
  FileTimerDriver(boost::asio::io_context& io, std::function<void()> before_print,
                  HungHandler on_hung);

  // Before the spawn: a server on this start's FIFO when the agent's environment enables it,
  // and TORCHELASTIC_TIMER_FILE in each launch's env. Throws when the FIFO cannot be made.
  void prepare(std::vector<WorkerLaunch>& launches, const EnvMap& agent_env);
  // Whether this start's FIFO is served (after prepare).
  bool serving() const { return server_.has_value(); }
  // The pids are known: requests are read from here on.
  void start(const std::vector<WatchedWorker>& workers);
  // An exited worker's timers go (its pid may be reused).
  void forget_worker(pid_t pid);
  // No more waits: nothing is detected (the FIFO stays, see HangWatchdog::stop_watching).
  void stop();
  // The group is gone: the FIFO is unlinked.
  void reset();

 private:
  void watch_fifo();
  void arm_deadline();
  void report(const FileTimerServer::Events& events);

  boost::asio::io_context& io_;
  std::function<void()> before_print_;
  HungHandler on_hung_;
  // Changes whenever waits are abandoned: a handler queued before sees it and does nothing.
  std::uint64_t generation_ = 0;
  std::optional<FileTimerServer> server_;
  std::unique_ptr<Descriptor> fifo_wait_;
  boost::asio::steady_timer deadline_;
};

}  // namespace ddprun::agent
