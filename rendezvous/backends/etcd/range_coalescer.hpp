#pragma once
// Range reads that one client issues in the same turn of its event loop go to etcd as one
// read-only txn, and each caller still gets a range reply of its own (the txn's header, so its
// revision, copied into it). Why: at 1,024 agents forming at once etcd's CPU bounds the
// formation, and every request through the JSON gateway costs an HTTP exchange, a gRPC call
// and a wait for a read index, where a txn of several ranges costs those once. The round
// machine issues such reads together (the --nnodes and round claims' reads; whether the job is
// closed and the expected count), so a join asks etcd two requests less.
// A lone read goes out as the range it is. Failures reach every read of the txn.
// Threading: one io_context thread; handlers run there, never inside read().

#include <chrono>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_failure.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"

namespace ddprun::rendezvous::backends::etcd {

class RangeCoalescer {
 public:
  using Clock = std::chrono::steady_clock;
  using Outcome = std::variant<nlohmann::json, EtcdFailure>;
  using Handler = std::function<void(Outcome)>;
  // Carries one request out (path, JSON body, deadline) with the retry policy of reads.
  using Send = std::function<void(std::string path, std::string body, Clock::time_point deadline,
                                  Handler done)>;

  // etcd's default --max-txn-ops: a txn of more operations is refused.
  static constexpr std::size_t kMaxReadsPerTxn = 128;

  // where names the cluster in messages ("etcd 127.0.0.1:2379").
  RangeCoalescer(boost::asio::io_context& io, std::string where, Send send);
  RangeCoalescer(const RangeCoalescer&) = delete;
  RangeCoalescer& operator=(const RangeCoalescer&) = delete;

  // range_body: a RangeRequest's JSON. done gets the range reply's JSON, or the failure.
  void read(std::string range_body, Clock::time_point deadline, Handler done);

 private:
  struct Read {
    std::string body;
    Clock::time_point deadline;
    Handler done;
  };
  void flush();
  void send_txn(std::vector<Read> reads);

  boost::asio::io_context& io_;
  std::string where_;
  Send send_;
  std::vector<Read> queued_;
  bool flush_posted_ = false;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
