#pragma once
// The static backend: --nnodes fixed nodes, each with its --node_rank; node 0 hosts the store
// at master_addr:master_port, which is also the workers' store (as torchrun). Round r is the
// job's r-th restart, so worker keys (/worker/attempt_<restart>) are fresh after every restart.

#include "agent/rdzv_store_rendezvous.hpp"

namespace ddprun::agent::rdzv {

class StaticRendezvous final : public StoreRendezvous {
 public:
  StaticRendezvous(const launcher::LaunchConfig& config, RdzvSettings settings,
                   StoreEndpoint endpoint, std::string run_id, std::string local_addr);

 private:
  FormedRound join(const std::optional<FormedRound>& previous) override;
  bool elastic() const override { return false; }
  void close_later_rounds(uint64_t round, const std::string& error) override;
  void check_config(uint64_t round);
};

}  // namespace ddprun::agent::rdzv
