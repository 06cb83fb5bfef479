#include "agent/stacks/capture_run.hpp"

#include <utility>

namespace ddprun::agent {

CaptureRun::CaptureRun(boost::asio::io_context& io, const StackCapturePlan& plan,
                       const EnvMap& tool_env, Done done)
    : runner_(
          std::make_unique<StackCaptureRunner>(plan, tool_env, StackCaptureRunner::Clock::now())),
      runner_fd_(wait_on(io, runner_->fd())),
      deadline_(io),
      done_(std::move(done)) {}

void CaptureRun::begin() {
  watch();
  advance();
}

void CaptureRun::cancel() {
  if (runner_) {
    runner_->cancel();
    finish();
  }
}

void CaptureRun::watch() {
  runner_fd_->async_wait(Descriptor::wait_read, [this, alive = std::weak_ptr<int>(alive_)](
                                                    const boost::system::error_code& error) {
    if (error || alive.expired() || !runner_) {
      return;
    }
    advance();
    if (!alive.expired() && runner_) {
      watch();
    }
  });
}

void CaptureRun::advance() {
  runner_->advance(StackCaptureRunner::Clock::now());
  if (runner_->done()) {
    finish();
    return;
  }
  deadline_.cancel();
  if (const auto deadline = runner_->next_deadline()) {
    deadline_.expires_at(*deadline);
    deadline_.async_wait(
        [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& error) {
          if (!error && !alive.expired() && runner_) {
            advance();
          }
        });
  }
}

void CaptureRun::finish() {
  deadline_.cancel();
  Results results = runner_->results();
  runner_fd_.reset();
  runner_.reset();
  // Last: `done` may destroy this object.
  const Done done = std::move(done_);
  done(std::move(results));
}

}  // namespace ddprun::agent
