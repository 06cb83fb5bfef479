#pragma once
// From the launch configuration to a ready rendezvous: which backend, whether this agent hosts
// the rendezvous store (c10d's is_host heuristic; static's node 0; --standalone's private
// store), the machine's configuration, and the backend that carries out its ops.

#include <chrono>
#include <memory>
#include <string>

#include "agent/base/agent_config.hpp"
#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/round/machine_config.hpp"
#include "rendezvous/store/asio.hpp"
#include "rendezvous/store/store_server.hpp"

namespace ddprun::agent {

struct RendezvousSetup {
  rendezvous::round::MachineConfig machine;
  // The rendezvous store this agent hosts (its own event-loop thread), or null.
  std::unique_ptr<rendezvous::store::StoreServer> hosted_store;
  std::unique_ptr<rendezvous::backends::KvBackend> backend;
  // The address workers of a round this node leads are told (MASTER_ADDR): the node's
  // address, or "localhost" for --standalone, as torchrun.
  std::string workers_store_addr;
  // The agent's start line: which rendezvous, whether this agent hosts its store, and whether
  // a job secret guards it (and from where; never the secret).
  std::string start_line;
};

// Throws RendezvousError naming the option at fault.
RendezvousSetup set_up_rendezvous(const RendezvousConfig& config, boost::asio::io_context& io);

// A client of a running job's rendezvous (`ddprun stacks`): its backend only, never a hosted
// store. The first connection is waited for at most connect_limit. Throws RendezvousError
// naming the option at fault (--standalone has no rendezvous reachable from outside).
struct RendezvousClient {
  std::unique_ptr<rendezvous::backends::KvBackend> backend;
  std::string where;  // "rendezvous 'job' at 127.0.0.1:29400", for messages
};
RendezvousClient connect_to_rendezvous(const RendezvousConfig& config, boost::asio::io_context& io,
                                       std::chrono::milliseconds connect_limit);

}  // namespace ddprun::agent
