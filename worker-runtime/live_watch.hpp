#pragma once
// Watches live recovery's control file (live_world.hpp) on a thread of its own, so that the
// training loop pays nothing for it: a stat() every few milliseconds, a read only when the agent
// replaced the file. When the file announces a world other than the one being trained in (the
// round re-forms, or a new one runs), it sets a flag the loop checks between steps and calls
// on_change once, from its thread: the trainer aborts its collectives there, so that a step
// blocked on a peer that is gone fails at once instead of waiting out the backend's timeout.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "live_world.hpp"

namespace ddprun::train {

class LiveWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Reads the file once (throws LiveControlError when it is missing or malformed) and starts
  // watching it.
  LiveWatch(std::string control_path, std::function<void()> on_change);
  ~LiveWatch();
  LiveWatch(const LiveWatch&) = delete;
  LiveWatch& operator=(const LiveWatch&) = delete;

  // The world the file holds now.
  LiveWorld latest() const;
  // The trainer runs in `generation` from now on; a file announcing anything else is a change.
  void running_in(uint64_t generation);
  // A change was announced since running_in.
  bool changed() const { return changed_.load(std::memory_order_acquire); }
  // Blocks until the file holds a running world of a generation above `after`; nullopt when
  // `deadline` passes or `stop` says so first (polled every 50 ms).
  std::optional<LiveWorld> wait_for_world(uint64_t after, Clock::time_point deadline,
                                          const std::function<bool()>& stop);
  // Tells the agent this worker takes part: "<control>.joined.<local_rank>" holds its pid.
  void write_joined(int64_t local_rank) const;
  // Tells the agent this worker's collectives broke in `generation` (a peer is probably gone),
  // so that the round re-forms without waiting for the heartbeats: "<control>.broken.<rank>".
  void report_broken(int64_t local_rank, uint64_t generation) const;

 private:
  void watch(const std::stop_token& stop);
  void look();

  const std::string path_;
  const std::function<void()> on_change_;
  mutable std::mutex mutex_;
  std::condition_variable updated_;
  LiveWorld latest_;
  uint64_t running_generation_ = 0;
  std::atomic<bool> changed_{false};
  // What the last read saw of the file, to read it again only when it was replaced.
  ino_t inode_ = 0;
  int64_t modified_ns_ = 0;
  std::jthread thread_;  // last: it starts once everything above is ready
};

}  // namespace ddprun::train
