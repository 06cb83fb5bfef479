#pragma once
// Everything one node's round machine needs to know before it starts: who it is, the job's
// shape, and the protocol's timeouts. Built once by the agent from the parsed command line.

#include <cstdint>
#include <optional>
#include <string>

#include "common/seconds.hpp"
#include "rendezvous/round/records.hpp"
#include "rendezvous/round/round_settings.hpp"

namespace ddprun::rendezvous::round {

enum class RoundMode {
  // c10d and etcd: rounds of MIN..MAX nodes that form from whoever joins, with heartbeats,
  // loss detection, late and waiting nodes.
  kDynamic,
  // static: exactly MAX nodes, each with its --node_rank; rounds re-form only for restarts.
  kStatic,
};

struct MachineConfig {
  RoundMode mode = RoundMode::kDynamic;
  std::string run_id;
  // This node as the others see it: address, pid, nonce, workers per node, rank hint,
  // --nnodes. Static: rank_hint is --node_rank.
  NodeRecord self;
  int max_restarts = 0;
  RdzvSettings settings;
  common::Seconds exit_barrier_timeout{300};
  // How long a node stopped by a signal tries to leave the rendezvous before it exits anyway.
  common::Seconds leave_timeout{2};
  // This node's process hosts the rendezvous store: on close it stays (up to close_timeout)
  // until every node of the round has left, so the others can still read the job's failures.
  bool hosts_store = false;
  // "rendezvous 'job' at host:port", for messages.
  std::string where;
  // Static: the workers use the agents' store at this address (torchrun's static backend).
  std::string static_master_addr;
  uint16_t static_master_port = 0;
  // How long one wait for a round's wake-up key may run before it is re-armed.
  common::Seconds wake_wait{3600};
  // How long a node with a hung worker waits for the other nodes' stacks before it signals
  // the worker anyway (their capture tools are bounded too; this bounds a node that never
  // answers).
  common::Seconds peer_stacks_wait{5};
  // This agent watches its workers for hangs: it also captures their stacks when another
  // node's worker hangs (it waits on the round's hang key for that).
  bool captures_stacks_for_peers = false;
  // Node checks (--health-check): set, the machine asks for them (CheckNode) before the first
  // join and before every re-join, and a node that fails them does not join: it says why and
  // asks again after this interval. The other nodes form their rounds without it, as without
  // any node that does not come (MIN:MAX lets a waiting spare take its place).
  std::optional<common::Seconds> node_check_interval;
};

}  // namespace ddprun::rendezvous::round
