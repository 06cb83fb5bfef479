#pragma once
// Runs many reads or writes as a few etcd txns, one after another: etcd takes at most 128
// operations (--max-txn-ops) and 1.5 MiB (--max-request-bytes) per request, so the operations
// are cut into txns under both limits. Each txn is atomic; the batch as a whole is not (the
// round machine's multi-key ops do not ask it to be). Every txn may be repeated safely (reads,
// or puts of fixed values), so each is retried across members until the deadline.
//
// Threading: one io_context thread; done runs there, never inside start(), at most once.

#include <chrono>
#include <cstddef>
#include <functional>
#include <variant>
#include <vector>

#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/etcd_messages.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"
#include "rendezvous/round/kv_ops.hpp"

namespace ddprun::rendezvous::backends::etcd {

class TxnBatch {
 public:
  using Clock = std::chrono::steady_clock;
  using Result = std::variant<std::vector<TxnReply>, round::KvError>;

  // etcd's default --max-txn-ops.
  static constexpr std::size_t kMaxTxnOperations = 128;
  // Below etcd's default --max-request-bytes (1.5 MiB) with room for JSON and base64.
  static constexpr std::size_t kMaxTxnPayloadBytes = 768 * 1024;

  // The operations, cut into txns (in order) that each run all of their operations.
  static std::vector<TxnRequest> split(std::vector<TxnOperation> operations);

  TxnBatch(EtcdClient& client, std::vector<TxnRequest> txns, Clock::time_point deadline,
           std::function<void(Result)> done);
  TxnBatch(const TxnBatch&) = delete;
  TxnBatch& operator=(const TxnBatch&) = delete;

  void start();

 private:
  void run_next();

  EtcdClient& client_;
  std::vector<TxnRequest> txns_;
  Clock::time_point deadline_;
  std::function<void(Result)> done_;
  std::vector<TxnReply> replies_;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
