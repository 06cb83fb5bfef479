#include "agent/watchdog/file_timer_driver.hpp"

#include <cstdio>

#include "agent/watchdog/file_timer/file_timer_setup.hpp"
#include "common/seconds.hpp"

namespace ddprun::agent {

FileTimerDriver::FileTimerDriver(boost::asio::io_context& io, std::function<void()> before_print,
                                 HungHandler on_hung)
    : io_(io),
      before_print_(std::move(before_print)),
      on_hung_(std::move(on_hung)),
      deadline_(io) {}

void FileTimerDriver::prepare(std::vector<WorkerLaunch>& launches, const EnvMap& agent_env) {
  reset();
  const FileTimerSetup setup =
      decide_file_timer_setup(agent_env, default_file_timer_path(agent_env));
  if (setup.serve)
    server_.emplace(*setup.path);
  for (WorkerLaunch& launch : launches)
    add_file_timer_env(launch.env, setup);
}

void FileTimerDriver::start(const std::vector<WatchedWorker>& workers) {
  if (!server_)
    return;
  server_->watch(workers);
  fifo_wait_ = wait_on(io_, server_->fd());
  watch_fifo();
}

void FileTimerDriver::forget_worker(pid_t pid) {
  if (server_)
    server_->forget_worker(pid);
  // Its timers may have held the next deadline; only while the FIFO is watched.
  if (server_ && fifo_wait_)
    arm_deadline();
}

void FileTimerDriver::stop() {
  ++generation_;
  deadline_.cancel();
  fifo_wait_.reset();
}

void FileTimerDriver::reset() {
  stop();
  server_.reset();  // unlinks the FIFO
}

void FileTimerDriver::watch_fifo() {
  fifo_wait_->async_wait(Descriptor::wait_read,
                         [this, generation = generation_](const boost::system::error_code& error) {
                           if (error || generation != generation_ || !server_)
                             return;
                           const FileTimerServer::Events events =
                               server_->on_readable(unix_time_now());
                           if (!events.warnings.empty()) {
                             before_print_();
                             for (const auto& warning : events.warnings)
                               std::fprintf(stderr, "ddprun: warning: %s\n", warning.c_str());
                             std::fflush(stderr);
                           }
                           watch_fifo();
                           report(events);
                         });
}

void FileTimerDriver::arm_deadline() {
  const std::optional<double> deadline = server_->next_deadline_epoch_s();
  deadline_.cancel();
  if (!deadline)
    return;
  // The requests carry wall-clock times; the wait is on the steady clock from now.
  deadline_.expires_after(common::steady(common::Seconds(*deadline - unix_time_now())));
  deadline_.async_wait([this, generation = generation_](const boost::system::error_code& error) {
    if (error || generation != generation_ || !server_)
      return;
    report(server_->on_deadline(unix_time_now()));
  });
}

// Re-arms first: the handler may stop this driver.
void FileTimerDriver::report(const FileTimerServer::Events& events) {
  std::vector<HungRank> hung;
  for (const TimerExpiry& expiry : events.expired)
    hung.push_back(hung_rank_from_timer(expiry));
  arm_deadline();
  if (!hung.empty())
    on_hung_(std::move(hung));
}

}  // namespace ddprun::agent
