#pragma once
// The c10d backend (and --standalone): dynamic rounds of MIN..MAX nodes on a TCPStore-protocol
// store. Per round, each node does a constant number of store operations; the closing node does
// one multi_get and one multi_set over the round's N records.

#include <memory>

#include "agent/rdzv_store_rendezvous.hpp"

namespace ddprun::agent::rdzv {

class C10dRendezvous final : public StoreRendezvous {
 public:
  C10dRendezvous(const launcher::LaunchConfig& config, RdzvSettings settings,
                 StoreEndpoint endpoint, std::string run_id, std::string local_addr);

 private:
  FormedRound join(const std::optional<FormedRound>& previous) override;
  bool elastic() const override { return true; }
  void close_later_rounds(uint64_t round, const std::string& error) override;

  // The closing node: gathers the records, ranks them, publishes every node's assignment.
  void publish_assignments(uint64_t round, int participants);
  // The round's rank 0: a fresh store for the workers, so their keys never leak across rounds.
  std::pair<std::string, uint16_t> workers_store(const FormedRound& round);
  void check_config();

  std::unique_ptr<rendezvous::store::StoreServer> workers_store_;
  bool config_checked_ = false;
};

}  // namespace ddprun::agent::rdzv
