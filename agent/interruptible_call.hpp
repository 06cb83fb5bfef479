#pragma once
// Runs a blocking rendezvous call (next_round, exit_barrier: minutes at worst) on a helper
// thread while the calling thread keeps watching the signal channel, so SIGTERM during a
// rendezvous is acted on at once instead of after join_timeout.

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <variant>

#include "agent/owned_fd.hpp"
#include "agent/signal_channel.hpp"

namespace ddprun::agent {

// Either the call's result, or the number of the handled signal that arrived first. On a
// signal the helper thread is left running (it cannot be cancelled): the caller must end the
// process right away, which it does (the agent exits with 128+signal).
template <class Result>
std::variant<Result, int> call_interruptibly(SignalChannel& signals, std::function<Result()> work) {
  // Shared with the helper, which may outlive this frame when a signal wins.
  struct State {
    std::promise<Result> promise;
    OwnedFd done{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
    std::function<Result()> work;
  };
  auto state = std::make_shared<State>();
  state->work = std::move(work);
  std::future<Result> result = state->promise.get_future();
  std::thread helper([state] {
    try {
      state->promise.set_value(state->work());
    } catch (...) {
      state->promise.set_exception(std::current_exception());
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(state->done.get(), &one, sizeof one);
  });
  for (;;) {
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {state->done.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR)
      break;
    if (fds[1].revents != 0)
      break;
    if (fds[0].revents != 0) {
      auto drained = signals.drain();  // SIGCHLD here belongs to no worker: ignored
      if (!drained.handled_signals.empty()) {
        helper.detach();
        return drained.handled_signals.front();
      }
    }
  }
  helper.join();
  return result.get();
}

// Runs work on a helper thread and waits at most limit. false: it did not finish (the helper
// keeps running, detached; the caller must end the process soon). Exceptions are swallowed:
// this is for best-effort calls on the way out.
inline bool call_with_deadline(std::function<void()> work, std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread helper([done, work = std::move(work)] {
    try {
      work();
    } catch (...) {
    }
    done->set_value();
  });
  if (finished.wait_for(limit) == std::future_status::ready) {
    helper.join();
    return true;
  }
  helper.detach();
  return false;
}

}  // namespace ddprun::agent
