#pragma once
// EtcdKv: the round machine's key-value operations (round/kv_ops.hpp) carried out on an etcd
// v3 cluster through its JSON gateway, with failover among the members.
//
//   KvGet, KvMultiGet    range; ranges in txns of at most 128 (linearizable reads); ranges
//                        started in one event-loop turn (also CasUpdate's) share one txn
//   KvSet, KvMultiSet    put; puts in txns of at most 128
//   KvAdd, KvAppend      read + txn comparing mod_revision (create_revision 0 when absent),
//                        retried on conflict, exactly once despite lost replies (CasUpdate,
//                        fenced)
//   KvCompareSet         the same, unfenced: no lease, and no write when the key holds
//                        something else already
//   KvWait               read, then a watch from the revision after it (KeyWaiter)
//   KvBeat               the key put once on this agent's lease, which LeaseKeeper renews
//   KvProbe              range: present -> a fresh counter; absent -> gone once seen present;
//                        once present, a watch of the key answers instead (BeatWatch)
//   KvTakeTicket         one txn: put <key>/<member>, count the tickets (its position)
//   KvCountTickets       range, count only
//
// Every key lives under options.key_prefix. The backend's own bookkeeping keys (fences of
// CasUpdate, on the lease) live under "<prefix>_ddprun_etcd/", so the lease is granted by the
// first KvBeat, or KvAdd or KvAppend that writes. KvBeat answers an error once
// renewals have failed for the whole failover budget; a lease found expired is replaced and the
// beat keys put again. Raft writes, which etcd syncs to disk, are what bounds a round's
// formation at scale: a join costs its ticket txn and its record put; lease renewals are no
// raft writes (etcd 3.4's leader renews leases in memory).
// Every op gives up after options.failover_budget (a KvWait also ends at its own timeout).
// close() ends pending KvWaits with kUnreachable (they could last their whole timeout),
// waits for the other ops, revokes the lease, closes the connections, then posts done.
// Threading: KvBackend's contract: one io_context thread; completions are posted, so they
// never run inside start() and may destroy the backend.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/beat_watch.hpp"
#include "rendezvous/backends/etcd/cas_update.hpp"
#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/backends/etcd/lease_keeper.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"
#include "rendezvous/backends/kv_backend.hpp"

namespace ddprun::rendezvous::backends::etcd {

class EtcdKv final : public KvBackend {
 public:
  // Throws std::invalid_argument when an option is invalid or a TLS file is unusable.
  EtcdKv(boost::asio::io_context& io, EtcdOptions options);
  ~EtcdKv() override;

  void start(uint64_t id, round::KvOp op, Completion done) override;
  void cancel(uint64_t id) override;
  void close(std::function<void()> done) override;
  std::string describe() const override;

  // The value of a beat key (its lease is what matters).
  static constexpr std::string_view kBeatValue = "alive";
  // Under the key prefix: this backend's own keys.
  static constexpr std::string_view kInternalDirectory = "_ddprun_etcd/";

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    uint64_t id = 0;
    Completion done;
    std::shared_ptr<void> work;             // the object carrying the op out, if any
    std::optional<round::KvResult> result;  // set once finished, delivered by a posted call
    bool is_wait = false;                   // a KvWait: close() ends it rather than wait
  };

  uint64_t begin(uint64_t id, Completion done);
  void finish(uint64_t serial, round::KvResult result);
  void deliver(uint64_t serial);
  void adopt(uint64_t serial, std::shared_ptr<void> work);
  void maybe_finish_close();

  // One explicit specialization per KvOp alternative, defined in etcd_kv.cpp.
  template <class Op>
  void run(uint64_t serial, Op op);
  // A range read whose reply goes to then; failures and bad replies finish the op.
  void read_range(uint64_t serial, const RangeRequest& request,
                  std::function<void(const RangeReply&)> then);
  // Counts the tickets at key created up to revision (0: all).
  void count_tickets(uint64_t serial, const std::string& key, std::int64_t up_to_revision);
  void beat(uint64_t serial, std::string key, Clock::time_point deadline, bool renewed);
  void update(uint64_t serial, const std::string& key, CasUpdate::Rule rule,
              CasUpdate::Fencing fencing = CasUpdate::Fencing::kFence);

  std::string full_key(const std::string& key) const { return options_.key_prefix + key; }
  std::string new_fence_key();
  Clock::time_point deadline() const { return Clock::now() + options_.failover_budget; }
  round::KvError protocol_error(const std::string& what) const;

  boost::asio::io_context& io_;
  EtcdOptions options_;
  EtcdClient client_;
  LeaseKeeper lease_;
  std::string nonce_;  // tells this backend's fences from every other's
  uint64_t next_fence_ = 0;
  uint64_t next_serial_ = 0;
  int64_t probe_counter_ = 0;
  std::map<uint64_t, Pending> pending_;         // by serial
  std::map<uint64_t, uint64_t> serial_of_;      // caller's id -> serial, while pending
  std::map<std::string, int64_t> beat_leases_;  // beat key -> lease it was put with
  std::set<std::string> seen_alive_;            // probed keys once found present
  std::unique_ptr<BeatWatch> beat_watch_;       // the probed key, once found present
  bool closing_ = false;
  bool closed_ = false;
  std::function<void()> close_done_;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
