#pragma once
// This agent's etcd lease: granted when first needed, renewed every keep-alive interval (one
// keeper per backend, whatever the number of keys on the lease), revoked on close so that the
// keys on it vanish at once. If renewals fail for longer than the TTL, or etcd says the lease
// is gone, the lease is forgotten and the next acquire() grants a new one.
//
// Threading: one io_context thread; handlers run there, never inside the call that took them.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <variant>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/etcd_failure.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"

namespace ddprun::rendezvous::backends::etcd {

class LeaseKeeper {
 public:
  using Clock = std::chrono::steady_clock;
  using LeaseHandler = std::function<void(std::variant<std::int64_t, EtcdFailure>)>;

  LeaseKeeper(EtcdClient& client, std::chrono::seconds ttl, std::chrono::milliseconds interval);
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // The lease ID, granting one first if there is none.
  void acquire(Clock::time_point deadline, LeaseHandler done);
  // etcd answered that lease `id` does not exist (expired): stop renewing it.
  void forget(std::int64_t id);
  // The last renewal failure, once renewals have failed for the whole failover budget (one
  // failed renewal is no news: the lease lives on until its TTL, and a new leader extends it).
  std::optional<EtcdFailure> trouble() const;
  // Stops renewing, revokes the lease (if any) before deadline, then runs done.
  void revoke(Clock::time_point deadline, std::function<void()> done);

 private:
  void grant(Clock::time_point deadline);
  void schedule_renewal();
  void renew();

  EtcdClient& client_;
  std::chrono::seconds ttl_;
  std::chrono::milliseconds interval_;
  boost::asio::steady_timer timer_;
  std::int64_t lease_ = 0;  // 0: none
  bool granting_ = false;
  bool renewing_ = false;
  bool revoked_ = false;
  std::uint64_t generation_ = 0;  // bumped when the lease changes, to drop stale renewals
  std::optional<EtcdFailure> trouble_;
  std::optional<Clock::time_point> failing_since_;  // first failed renewal since one worked
  std::vector<LeaseHandler> waiting_;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
