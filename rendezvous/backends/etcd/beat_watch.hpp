#pragma once
// Whether one peer's beat key exists, kept current by a watch instead of a read per probe.
//
// The round machine probes its neighbour's beat key every check period (a quarter of
// keep_alive_interval), so N agents would read N keys several times a second, forever; on etcd
// the key only vanishes with its owner's lease, which a watch reports as a delete. The watch
// starts from the revision after the read that found the key, so nothing between that read and
// the watch is missed, and it moves to another member when its member fails or loses its leader
// (WatchStream). A watch that fails for the whole failover budget, or whose start revision was
// compacted away, marks itself broken: its owner then reads the key again.
//
// Threading: one io_context thread.

#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/watch_stream.hpp"

namespace ddprun::rendezvous::backends::etcd {

class BeatWatch {
 public:
  // key: the full etcd key, found present by a read at read_revision.
  BeatWatch(EtcdClient& client, std::string key, std::int64_t read_revision);
  BeatWatch(const BeatWatch&) = delete;
  BeatWatch& operator=(const BeatWatch&) = delete;

  void start();
  const std::string& key() const { return key_; }
  bool present() const { return present_; }
  bool broken() const { return broken_; }

 private:
  std::string key_;
  bool present_ = true;
  bool broken_ = false;
  std::unique_ptr<WatchStream> watch_;
};

}  // namespace ddprun::rendezvous::backends::etcd
