// FailoverLog: per-member trouble of one request and the message it ends with.

#include "rendezvous/backends/etcd/failover_log.hpp"

namespace ddprun::rendezvous::backends::etcd {

FailoverLog::FailoverLog(const std::vector<EtcdEndpoint>& endpoints)
    : endpoints_(endpoints), entries_(endpoints.size()) {}

void FailoverLog::record(std::size_t member, Trouble trouble, std::string detail) {
  auto& entry = entries_.at(member);
  entry.failed = true;
  entry.trouble = trouble;
  entry.detail = std::move(detail);
  saw_no_leader_ |= trouble == Trouble::kNoLeader;
}

bool FailoverLog::usable(std::size_t member) const {
  const auto& entry = entries_.at(member);
  return !entry.failed || (entry.trouble != Trouble::kProtocol && entry.trouble != Trouble::kTls);
}

bool FailoverLog::any_usable() const {
  for (std::size_t member = 0; member < entries_.size(); ++member) {
    if (usable(member)) {
      return true;
    }
  }
  return false;
}

EtcdFailure FailoverLog::summary(const std::string& what, std::chrono::milliseconds waited) const {
  bool no_leader = saw_no_leader_;
  bool protocol = false;
  bool tls = false;
  bool unresponsive = false;
  std::size_t refused = 0;   // no connection, or it broke: the member is down or cut off
  std::size_t answered = 0;  // connected, and then could not serve
  std::string details;
  for (std::size_t member = 0; member < entries_.size(); ++member) {
    const auto& entry = entries_[member];
    if (!entry.failed) {
      continue;
    }
    no_leader |= entry.trouble == Trouble::kNoLeader;
    protocol |= entry.trouble == Trouble::kProtocol;
    tls |= entry.trouble == Trouble::kTls;
    unresponsive |= entry.trouble == Trouble::kUnresponsive;
    refused += entry.trouble == Trouble::kUnreachable ? 1 : 0;
    answered +=
        entry.trouble == Trouble::kUnresponsive || entry.trouble == Trouble::kNoLeader ? 1 : 0;
    details +=
        (details.empty() ? "" : "; ") + format_endpoint(endpoints_[member]) + ": " + entry.detail;
  }
  // A member that has lost its leader either says so or lets the request time out, which one
  // depends on timing. When most members refuse connections, the cluster cannot hold a quorum
  // whichever the members that still listen did: the outcome is one, not a race.
  no_leader |= answered > 0 && 2 * refused > entries_.size();
  EtcdFailure failure;
  std::string headline;
  if (no_leader) {
    failure.kind = round::KvErrorKind::kRejected;
    headline = "the etcd cluster lost quorum (no member could serve the " + what + ")";
  } else if (protocol) {
    failure.kind = round::KvErrorKind::kProtocol;
    headline = "an etcd member sent a malformed reply to the " + what;
  } else if (tls) {
    failure.kind = round::KvErrorKind::kUnreachable;
    headline = "no TLS connection to an etcd member could be made for the " + what;
  } else if (unresponsive) {
    failure.kind = round::KvErrorKind::kUnresponsive;
    headline = "no etcd member answered the " + what + " in time";
  } else {
    failure.kind = round::KvErrorKind::kUnreachable;
    headline = "no etcd member answered the " + what;
  }
  failure.message = "etcd " + format_endpoints(endpoints_) + ": " + headline + ", after " +
                    std::to_string(waited.count()) + " ms" +
                    (details.empty() ? std::string() : ": " + details);
  return failure;
}

}  // namespace ddprun::rendezvous::backends::etcd
