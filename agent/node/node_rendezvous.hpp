#pragma once
// What one agent holds for the rendezvous, whatever runs its workers: the rendezvous store it
// may host, the round driver over its backend, and the store it hosts for the workers of each
// round it leads. The agent's run loop holds one; so does each headless agent of the tests and
// of the scale simulator.

#include <memory>
#include <string>

#include "agent/base/agent_config.hpp"
#include "rendezvous/backends/round_driver.hpp"
#include "rendezvous/store/asio.hpp"
#include "rendezvous/store/store_server.hpp"

namespace ddprun::agent {

class NodeRendezvous {
 public:
  // Throws what set_up_rendezvous throws (RendezvousError naming the option at fault).
  // stacks: nullptr for an agent without worker stacks to capture; checker: nullptr for an
  // agent without node checks.
  NodeRendezvous(const RendezvousConfig& config, boost::asio::io_context& io,
                 rendezvous::backends::RoundListener& listener,
                 rendezvous::backends::StackCapturer* stacks = nullptr,
                 rendezvous::backends::NodeChecker* checker = nullptr);
  NodeRendezvous(const NodeRendezvous&) = delete;
  NodeRendezvous& operator=(const NodeRendezvous&) = delete;
  ~NodeRendezvous();

  rendezvous::backends::RoundDriver& driver() { return *driver_; }
  bool hosts_rendezvous_store() const { return hosted_store_ != nullptr; }
  // "joining rendezvous 'job' at host:29400, hosting its store; job secret from ...".
  const std::string& start_line() const { return start_line_; }

  // Answers the machine's HostWorkersStore: replaces the workers' store with a fresh one and
  // feeds WorkersStoreHosted, or WorkersStoreFailed when it cannot listen.
  void host_workers_store();

 private:
  std::string workers_store_bind_;  // loopback for --standalone, else every interface
  std::string workers_store_addr_;  // what the workers are told (MASTER_ADDR)
  std::string start_line_;
  // Declared before the driver, so the driver (which may feed them) goes first.
  std::unique_ptr<rendezvous::store::StoreServer> hosted_store_;
  std::unique_ptr<rendezvous::store::StoreServer> workers_store_;
  std::unique_ptr<rendezvous::backends::RoundDriver> driver_;
};

}  // namespace ddprun::agent
