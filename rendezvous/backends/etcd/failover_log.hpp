#pragma once
// What went wrong with each member while one request was tried across the cluster, and the
// single failure to report once the request gives up: a lost quorum when any member answered
// that it has no leader, or when most members refuse connections and one that listens could not
// serve (said no leader or timed out), a protocol error when a member talked nonsense, otherwise
// unreachable or unresponsive, always naming the endpoints.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "rendezvous/backends/etcd/etcd_failure.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"

namespace ddprun::rendezvous::backends::etcd {

class FailoverLog {
 public:
  enum class Trouble {
    kUnreachable,   // refused, reset, closed: try another member
    kUnresponsive,  // no answer in time: try another member
    kNoLeader,      // the member answered that it cannot reach a quorum
    kProtocol,      // malformed reply: this member is no use for this request
    kTls,           // handshake failed: no use either
  };

  // endpoints must outlive the log (the client owns them).
  explicit FailoverLog(const std::vector<EtcdEndpoint>& endpoints);

  void record(std::size_t member, Trouble trouble, std::string detail);
  // Worth asking again (its trouble may pass); false for protocol and TLS failures.
  bool usable(std::size_t member) const;
  bool any_usable() const;
  // The failure to report; `what` names the request ("range", "watch").
  EtcdFailure summary(const std::string& what, std::chrono::milliseconds waited) const;

 private:
  struct Entry {
    bool failed = false;
    Trouble trouble = Trouble::kUnreachable;
    std::string detail;
  };
  const std::vector<EtcdEndpoint>& endpoints_;
  std::vector<Entry> entries_;
  // Some member said it has no leader at some point: the cluster lost its quorum, whatever
  // that member answered last (a timeout while it still believed in its leader, say).
  bool saw_no_leader_ = false;
};

}  // namespace ddprun::rendezvous::backends::etcd
