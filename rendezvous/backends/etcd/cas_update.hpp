#pragma once
// A read-modify-write of one key (KvAdd, KvAppend, KvCompareSet) that is applied exactly once
// even when a write times out and etcd applies it later.
//
// Each attempt reads the key, lets the rule decide the new value, and writes it with a txn
// that compares the key's mod_revision (create_revision 0 when absent) and, in the same txn,
// creates a fence key unique to the attempt (on the agent's lease, so fences vanish with it).
// The lease is acquired only when the rule decides to write: a claim another agent already
// holds costs one read, no lease grant (a raft write).
//
// Unfenced (Fencing::kNone, for a compare-and-set): the write needs no fence, as its answer is
// only what the key holds afterwards. An attempt whose outcome is unknown is settled by reading
// the key again and letting the rule decide: if the attempt was applied the rule sees its
// value; if not, the next txn compares the same revision, so at most one of the two applies.
// No fence, no lease: one read and one txn.
// A conflict retries from the value the txn's failure branch returned. When an attempt's
// outcome is unknown (timed out, connection lost after sending), the fence settles it: a txn
// creates the fence key as "fenced" unless it exists. If it exists as "applied", the attempt
// was applied; otherwise it never can be (its txn requires the fence to be absent), and the
// update starts over with a new fence.
//
// Threading: one io_context thread; done runs there, never inside start(), at most once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/etcd_messages.hpp"
#include "rendezvous/backends/etcd/lease_keeper.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"
#include "rendezvous/round/kv_ops.hpp"

namespace ddprun::rendezvous::backends::etcd {

class CasUpdate {
 public:
  using Clock = std::chrono::steady_clock;
  // desired: the value to write (nullopt: leave the key alone); answer: the op's result once
  // the write (if any) is applied.
  struct Plan {
    std::optional<std::string> desired;
    round::KvResult answer;
  };
  using Rule =
      std::function<std::variant<Plan, round::KvError>(const std::optional<std::string>& current)>;
  // kFence: the rule is not idempotent (add, append); kNone: applying it twice gives the same
  // answer (compare-and-set).
  enum class Fencing { kFence, kNone };

  CasUpdate(EtcdClient& client, LeaseKeeper& lease, std::string key,
            std::function<std::string()> new_fence_key, Rule rule, Fencing fencing,
            Clock::time_point deadline, std::function<void(round::KvResult)> done);
  CasUpdate(const CasUpdate&) = delete;
  CasUpdate& operator=(const CasUpdate&) = delete;

  void start();

  static constexpr std::string_view kFenceApplied = "applied";
  static constexpr std::string_view kFenceFenced = "fenced";

 private:
  void acquire_lease();
  void read();
  void decide(const std::optional<EtcdKeyValue>& current);
  void write();
  void settle();
  void finish(round::KvResult result);
  round::KvError error(round::KvErrorKind kind, const std::string& what) const;

  EtcdClient& client_;
  LeaseKeeper& lease_keeper_;
  std::string key_;
  std::function<std::string()> new_fence_key_;
  Rule rule_;
  Fencing fencing_;
  Clock::time_point deadline_;
  std::function<void(round::KvResult)> done_;
  std::int64_t lease_ = 0;
  std::string fence_key_;
  std::optional<EtcdKeyValue> current_;  // as last read
  std::optional<Plan> plan_;             // for current_
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
