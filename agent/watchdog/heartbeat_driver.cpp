#include "agent/watchdog/heartbeat_driver.hpp"

#include <algorithm>

namespace ddprun::agent {
namespace {

std::optional<std::chrono::milliseconds> whole_millis(std::optional<common::Seconds> timeout) {
  if (!timeout)
    return std::nullopt;
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(*timeout));
}

}  // namespace

HeartbeatDriver::HeartbeatDriver(boost::asio::io_context& io,
                                 std::optional<common::Seconds> timeout, HungHandler on_hung,
                                 BeatObserver on_beats)
    : io_(io),
      timeout_(whole_millis(timeout)),
      on_hung_(std::move(on_hung)),
      on_beats_(std::move(on_beats)),
      deadline_(io) {}

void HeartbeatDriver::prepare(std::vector<WorkerLaunch>& launches) {
  reset();
  if (!timeout_)
    return;
  progress_.emplace(*timeout_);
  for (WorkerLaunch& launch : launches) {
    auto beat = std::make_unique<Heartbeat>();
    beat->local_rank = launch.local_rank;
    HeartbeatChannel::add_to_env(launch.env);
    launch.heartbeat_fd = beat->channel.worker_end();
    heartbeats_.push_back(std::move(beat));
  }
}

void HeartbeatDriver::start(const std::vector<WatchedWorker>& workers) {
  for (auto& beat : heartbeats_)
    beat->channel.close_worker_end();
  if (!progress_)
    return;
  watching_ = true;
  progress_->start_group(workers);
  for (std::size_t i = 0; i < heartbeats_.size(); ++i) {
    heartbeats_[i]->wait = wait_on(io_, heartbeats_[i]->channel.fd());
    watch(i);
  }
}

void HeartbeatDriver::forget_worker(int local_rank) {
  if (!progress_)
    return;
  progress_->forget_worker(local_rank);
  if (watching_)
    arm_deadline();
}

void HeartbeatDriver::stop() {
  watching_ = false;
  ++generation_;
  deadline_.cancel();
  for (auto& beat : heartbeats_)
    beat->wait.reset();  // a full pipe only makes the worker's write fail with EAGAIN
}

void HeartbeatDriver::reset() {
  stop();
  heartbeats_.clear();
  progress_.reset();
}

void HeartbeatDriver::watch(std::size_t index) {
  Heartbeat& beat = *heartbeats_[index];
  if (!beat.wait)
    return;
  beat.wait->async_wait(Descriptor::wait_read, [this, index, generation = generation_](
                                                   const boost::system::error_code& error) {
    if (error || generation != generation_ || !progress_ || index >= heartbeats_.size())
      return;
    Heartbeat& ready = *heartbeats_[index];
    const HeartbeatChannel::Drained drained = ready.channel.drain();
    if (drained.bytes > 0) {
      progress_->on_heartbeat(ready.local_rank, ProgressWatch::Clock::now());
      arm_deadline();
      if (on_beats_)
        on_beats_(ready.local_rank, drained.bytes);
    }
    if (drained.closed)
      ready.wait.reset();  // stays readable at end-of-file: stop waiting
    else
      watch(index);
  });
}

void HeartbeatDriver::arm_deadline() {
  const std::optional<ProgressWatch::TimePoint> deadline = progress_->next_deadline();
  deadline_.cancel();
  if (!deadline)
    return;
  deadline_.expires_at(*deadline);
  deadline_.async_wait([this, generation = generation_](const boost::system::error_code& error) {
    if (error || generation != generation_ || !progress_)
      return;
    std::vector<HungRank> hung;
    for (const HungWorker& worker : progress_->take_hung(ProgressWatch::Clock::now()))
      hung.push_back(hung_rank_from_silence(worker, progress_->timeout()));
    arm_deadline();
    if (!hung.empty())
      on_hung_(std::move(hung));
  });
}

}  // namespace ddprun::agent
