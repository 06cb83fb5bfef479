#include "rendezvous/backends/round_driver.hpp"

#include <chrono>

#include "common/overloaded.hpp"
#include "common/seconds.hpp"

namespace ddprun::rendezvous::backends {
round::MachineTime machine_now() {
  return std::chrono::time_point_cast<common::Seconds>(std::chrono::steady_clock::now());
}

RoundDriver::RoundDriver(boost::asio::io_context& io, round::MachineConfig config,
                         std::unique_ptr<KvBackend> backend, RoundListener& listener,
                         StackCapturer* stacks, NodeChecker* checker)
    : machine_(std::move(config)),
      backend_(std::move(backend)),
      listener_(listener),
      stacks_(stacks),
      checker_(checker),
      timer_(io) {}

void RoundDriver::feed(round::MachineEvent event) {
  queue_.push_back(std::move(event));
  if (stepping_) {
    return;  // a listener fed an event from inside carry_out(): it runs after this one
  }
  stepping_ = true;
  while (!queue_.empty()) {
    round::MachineEvent next = std::move(queue_.front());
    queue_.pop_front();
    machine_.step(next, machine_now());
    carry_out();
  }
  stepping_ = false;
  arm_timer();
}

void RoundDriver::carry_out() {
  for (auto& effect : machine_.take_effects()) {
    std::visit(common::Overloaded{
                   [&](round::IssueKv& issue) {
                     const uint64_t id = issue.id;
                     std::weak_ptr<bool> alive = alive_;
                     backend_->start(id, std::move(issue.op),
                                     [this, id, alive](round::KvResult result) {
                                       if (!alive.expired()) {
                                         feed(round::KvAnswered{id, std::move(result)});
                                       }
                                     });
                   },
                   [&](round::CancelKv& cancel) { backend_->cancel(cancel.id); },
                   [&](round::HostWorkersStore& host) { listener_.host_workers_store(host.round); },
                   [&](round::StartWorkers& start) { listener_.start_workers(start.round); },
                   [&](round::StopWorkers& stop) { listener_.stop_workers(stop); },
                   [&](round::Notice& notice) { listener_.notice(notice); },
                   [&](round::Finish& finish) {
                     timer_.cancel();
                     listener_.finished(finish);
                   },
                   [&](round::CaptureStacks& capture) {
                     if (stacks_ != nullptr) {
                       stacks_->capture_stacks(capture);
                     } else {
                       feed(round::StacksCaptured{});
                     }
                   },
                   [&](round::PeersCapturedStacks&) {
                     if (stacks_ != nullptr) {
                       stacks_->peers_captured_stacks();
                     }
                   },
                   [&](round::CheckNode& check) {
                     if (checker_ != nullptr) {
                       checker_->check_node(check);
                     } else {
                       feed(round::NodeChecked{});
                     }
                   },
               },
               effect);
  }
}

void RoundDriver::arm_timer() {
  const auto deadline = machine_.next_deadline();
  if (!deadline || machine_.finished()) {
    timer_.cancel();
    return;
  }
  timer_.expires_after(common::steady(*deadline - machine_now()));
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& error) {
    if (!error && !alive.expired()) {
      feed(round::TimerFired{});
    }
  });
}

}  // namespace ddprun::rendezvous::backends
