#include "agent/headless_agent.hpp"

#include "agent/rendezvous_setup.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

HeadlessAgent::HeadlessAgent(boost::asio::io_context& io, const launcher::LaunchConfig& config,
                             Observer observer)
    : name_(config.local_addr.value_or("agent")), observer_(std::move(observer)) {
  RendezvousSetup setup = set_up_rendezvous(config, io);
  hosted_store_ = std::move(setup.hosted_store);
  workers_store_addr_ = setup.workers_store_addr;
  driver_ = std::make_unique<rendezvous::backends::RoundDriver>(io, std::move(setup.machine),
                                                                std::move(setup.backend), *this);
}

HeadlessAgent::~HeadlessAgent() = default;

void HeadlessAgent::begin() {
  driver_->begin();
}

void HeadlessAgent::succeed() {
  if (running_ && driver_) {
    running_.reset();
    driver_->feed(round::WorkersSucceeded{});
  }
}

void HeadlessAgent::fail(int exit_code) {
  if (!running_ || !driver_) {
    return;
  }
  WorkerFailure failure;
  failure.timestamp_s = rendezvous::backends::monotonic_now_s();
  failure.host = name_;
  failure.global_rank = running_->base_global_rank;
  failure.local_rank = 0;
  failure.exit_code = exit_code;
  failure.pid = 0;
  failure.message = "headless failure";
  driver_->feed(round::WorkersFailed{{failure}});
}

void HeadlessAgent::signal(int signal_number) {
  if (driver_) {
    driver_->feed(round::SignalReceived{signal_number});
  }
}

void HeadlessAgent::crash() {
  driver_.reset();
  workers_store_.reset();
  hosted_store_.reset();
  running_.reset();
}

void HeadlessAgent::host_workers_store(uint64_t /*round*/) {
  try {
    rendezvous::store::StoreServerOptions options;
    options.host = "0.0.0.0";
    options.port = 0;
    workers_store_ = rendezvous::store::StoreServer::start(options);
    driver_->feed(round::WorkersStoreHosted{workers_store_addr_, workers_store_->port()});
  } catch (const std::exception& error) {
    driver_->feed(round::WorkersStoreFailed{error.what()});
  }
}

void HeadlessAgent::start_workers(const RoundInfo& round) {
  running_ = round;
  rounds_.push_back(round);
  observe();
}

void HeadlessAgent::stop_workers(int /*signal*/) {
  running_.reset();
  driver_->feed(round::WorkersStopped{});
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

void HeadlessAgent::capture_stacks(const round::CaptureStacks& /*request*/) {
  driver_->feed(round::StacksCaptured{});  // no worker processes: nothing to capture
}

void HeadlessAgent::peers_captured_stacks() {}

void HeadlessAgent::observe() {
  if (observer_) {
    observer_(*this);
  }
}

}  // namespace ddprun::agent
