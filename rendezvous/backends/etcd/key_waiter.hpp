#pragma once
// KvWait: completes when every key exists, or with ready=false once the timeout passed.
//
// It reads the keys, and if some are missing, watches the range that spans them from the
// revision after that read, so a key created between the read and the watch is not missed.
// A ready answer carries the values it saw (KvReady::values), so a key written once need not
// be read again.
// The watch survives the loss of members (WatchStream). A compacted start revision means
// reading again. Destroying the waiter cancels it (closes its watch).
//
// Threading: one io_context thread; done runs there, never inside start(), at most once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"
#include "rendezvous/backends/etcd/txn_batch.hpp"
#include "rendezvous/backends/etcd/watch_stream.hpp"
#include "rendezvous/round/kv_ops.hpp"

namespace ddprun::rendezvous::backends::etcd {

class KeyWaiter {
 public:
  // keys: full etcd keys (with the prefix), at least one.
  KeyWaiter(EtcdClient& client, std::vector<std::string> keys, std::chrono::milliseconds timeout,
            std::function<void(round::KvResult)> done);
  KeyWaiter(const KeyWaiter&) = delete;
  KeyWaiter& operator=(const KeyWaiter&) = delete;
  ~KeyWaiter();

  void start();

 private:
  void read();
  void on_read(std::vector<TxnReply> replies);
  void watch(std::int64_t from_revision);
  void on_events(const std::vector<WatchEvent>& events);
  void retire_watch();
  void finish_ready();  // with the values seen
  void finish(round::KvResult result);

  EtcdClient& client_;
  std::vector<std::string> keys_;  // as asked, for the order of the values
  std::set<std::string> wanted_;
  std::set<std::string> missing_;
  std::map<std::string, std::string> seen_;  // the last value read or watched of each key
  std::chrono::milliseconds timeout_;
  std::function<void(round::KvResult)> done_;
  boost::asio::steady_timer timer_;
  std::unique_ptr<TxnBatch> read_;
  std::unique_ptr<WatchStream> watch_;
  bool reading_ = false;
  bool timed_out_ = false;
  bool finished_ = false;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
