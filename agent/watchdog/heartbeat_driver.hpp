#pragma once
// ddprun's progress watchdog (--watchdog-timeout) in the agent's event loop: per group start,
// one HeartbeatChannel per worker, a wait on each, and ProgressWatch's next deadline. Silent
// workers go to the hang handler as HungRanks; acting on them is HangResponder's part.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "agent/base/descriptor_wait.hpp"
#include "agent/base/heartbeat_channel.hpp"
#include "agent/watchdog/hang/hang_report.hpp"
#include "agent/watchdog/progress/progress_watch.hpp"
#include "agent/workers/worker_group.hpp"
#include "common/seconds.hpp"

namespace ddprun::agent {

class HeartbeatDriver {
 public:
  using HungHandler = std::function<void(std::vector<HungRank>)>;
  // Beats of one local rank that arrived together (one byte each): the straggler watch's input.
  using BeatObserver = std::function<void(int local_rank, std::size_t beats)>;
  // timeout: --watchdog-timeout; nullopt: off (prepare adds nothing, nothing is watched).
  HeartbeatDriver(boost::asio::io_context& io, std::optional<common::Seconds> timeout,
                  HungHandler on_hung, BeatObserver on_beats = {});

  // Before the spawn: a pipe per launch, its write end and variable in the launch.
  void prepare(std::vector<WorkerLaunch>& launches);
  // The workers hold the write ends now: the end of a pipe means its worker is gone.
  void start(const std::vector<WatchedWorker>& workers);
  void forget_worker(int local_rank);
  // No more waits; the pipes stay, so a worker's late beat never meets a closed pipe.
  void stop();
  // The group is gone: the pipes close.
  void reset();

 private:
  void watch(std::size_t index);
  void arm_deadline();

  struct Heartbeat {
    int local_rank = 0;
    HeartbeatChannel channel;
    std::unique_ptr<Descriptor> wait;  // null once closed
  };

  boost::asio::io_context& io_;
  std::optional<std::chrono::milliseconds> timeout_;
  HungHandler on_hung_;
  BeatObserver on_beats_;
  std::uint64_t generation_ = 0;  // as FileTimerDriver's
  bool watching_ = false;
  std::vector<std::unique_ptr<Heartbeat>> heartbeats_;
  std::optional<ProgressWatch> progress_;
  boost::asio::steady_timer deadline_;
};

}  // namespace ddprun::agent
