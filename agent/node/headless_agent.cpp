#include "agent/node/headless_agent.hpp"

#include <chrono>

#include "common/seconds.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

HeadlessAgent::HeadlessAgent(boost::asio::io_context& io, const RendezvousConfig& config,
                             Observer observer)
    : name_(config.local_addr.value_or("agent")),
      observer_(std::move(observer)),
      rendezvous_(std::make_unique<NodeRendezvous>(config, io, *this)) {}

HeadlessAgent::~HeadlessAgent() = default;

void HeadlessAgent::begin() {
  rendezvous_->driver().begin();
}

void HeadlessAgent::succeed() {
  if (running_ && rendezvous_) {
    running_.reset();
    rendezvous_->driver().feed(round::WorkersSucceeded{});
  }
}

void HeadlessAgent::fail(int exit_code) {
  if (!running_ || !rendezvous_) {
    return;
  }
  WorkerFailure failure;
  failure.timestamp =
      std::chrono::time_point_cast<common::Seconds>(std::chrono::system_clock::now());
  failure.host = name_;
  failure.global_rank = running_->base_global_rank;
  failure.local_rank = 0;
  failure.exit_code = exit_code;
  failure.pid = 0;
  failure.message = "headless failure";
  rendezvous_->driver().feed(round::WorkersFailed{{failure}});
}

void HeadlessAgent::signal(int signal_number) {
  if (rendezvous_) {
    rendezvous_->driver().feed(round::SignalReceived{signal_number});
  }
}

void HeadlessAgent::crash() {
  rendezvous_.reset();
  running_.reset();
}

void HeadlessAgent::host_workers_store(uint64_t /*round*/) {
  rendezvous_->host_workers_store();
}

void HeadlessAgent::start_workers(const RoundInfo& round) {
  running_ = round;
  rounds_.push_back(round);
  observe();
}

void HeadlessAgent::stop_workers(const round::StopWorkers& /*stop*/) {
  running_.reset();
  rendezvous_->driver().feed(round::WorkersStopped{});
  observe();
}

void HeadlessAgent::notice(const round::Notice& notice) {
  notices_.push_back(notice);
}

void HeadlessAgent::finished(const round::Finish& finish) {
  finish_ = finish;
  running_.reset();
  observe();
}

void HeadlessAgent::observe() {
  if (observer_) {
    observer_(*this);
  }
}

}  // namespace ddprun::agent
