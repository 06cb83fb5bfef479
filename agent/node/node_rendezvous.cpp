#include "agent/node/node_rendezvous.hpp"

#include "agent/node/rendezvous_setup.hpp"

namespace ddprun::agent {

NodeRendezvous::NodeRendezvous(const RendezvousConfig& config, boost::asio::io_context& io,
                               rendezvous::backends::RoundListener& listener,
                               rendezvous::backends::StackCapturer* stacks,
                               rendezvous::backends::NodeChecker* checker)
    : workers_store_bind_(config.standalone ? "127.0.0.1" : "0.0.0.0") {
  RendezvousSetup setup = set_up_rendezvous(config, io);
  hosted_store_ = std::move(setup.hosted_store);
  workers_store_addr_ = std::move(setup.workers_store_addr);
  start_line_ = std::move(setup.start_line);
  driver_ = std::make_unique<rendezvous::backends::RoundDriver>(
      io, std::move(setup.machine), std::move(setup.backend), listener, stacks, checker);
}

NodeRendezvous::~NodeRendezvous() = default;

void NodeRendezvous::host_workers_store() {
  workers_store_.reset();
  try {
    rendezvous::store::StoreServerOptions options;
    options.host = workers_store_bind_;
    options.port = 0;
    workers_store_ = rendezvous::store::StoreServer::start(options);
    driver_->feed(
        rendezvous::round::WorkersStoreHosted{workers_store_addr_, workers_store_->port()});
  } catch (const std::exception& error) {
    driver_->feed(rendezvous::round::WorkersStoreFailed{error.what()});
  }
}

}  // namespace ddprun::agent
