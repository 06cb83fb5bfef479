// FailoverLog's verdict once a request gives up across the members: which kind of failure, and
// a message naming every member and what each did.

#include "rendezvous/backends/etcd/failover_log.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

using namespace ddprun::rendezvous::backends::etcd;
using Trouble = FailoverLog::Trouble;
using ddprun::rendezvous::round::KvErrorKind;

namespace {

std::vector<EtcdEndpoint> members(int count) {
  std::vector<EtcdEndpoint> endpoints;
  for (int i = 0; i < count; ++i) {
    endpoints.push_back({"127.0.0." + std::to_string(i + 1), 2379});
  }
  return endpoints;
}

EtcdFailure verdict(const std::vector<EtcdEndpoint>& endpoints,
                    const std::vector<Trouble>& troubles) {
  FailoverLog log(endpoints);
  for (std::size_t member = 0; member < troubles.size(); ++member) {
    log.record(member, troubles[member], "trouble " + std::to_string(member));
  }
  return log.summary("put", std::chrono::milliseconds(1500));
}

}  // namespace

TEST_CASE("FailoverLog: a member without leader means a lost quorum", "[etcd]") {
  const auto endpoints = members(3);
  const auto failure =
      verdict(endpoints, {Trouble::kUnresponsive, Trouble::kNoLeader, Trouble::kUnreachable});
  CHECK(failure.kind == KvErrorKind::kRejected);
  CHECK_THAT(failure.message, Catch::Contains("lost quorum") && Catch::Contains("after 1500 ms"));
  for (int member = 0; member < 3; ++member) {
    CHECK_THAT(failure.message, Catch::Contains("127.0.0." + std::to_string(member + 1) +
                                                ":2379: trouble " + std::to_string(member)));
  }
}

TEST_CASE("FailoverLog: a lost quorum only where the members' troubles prove it", "[etcd]") {
  constexpr auto kRefused = Trouble::kUnreachable;
  constexpr auto kSlow = Trouble::kUnresponsive;
  struct Case {
    std::vector<Trouble> troubles;
    KvErrorKind kind;
    const char* headline;
  };
  const std::vector<Case> cases{
      // Most members refuse and one that listens could not serve, whether it said "no leader"
      // or let the request time out: one verdict.
      {{kRefused, kRefused, kSlow}, KvErrorKind::kRejected, "lost quorum"},
      {{kRefused, kRefused, Trouble::kNoLeader}, KvErrorKind::kRejected, "lost quorum"},
      {{kRefused, kRefused, kRefused, kSlow, kSlow}, KvErrorKind::kRejected, "lost quorum"},
      // A minority refused, the rest slow: no proof. Half is no majority.
      {{kRefused, kSlow, kSlow},
       KvErrorKind::kUnresponsive,
       "no etcd member answered the put in time"},
      {{kRefused, kRefused, kSlow, kSlow}, KvErrorKind::kUnresponsive, "answered the put in time"},
      // Every member refused: the client may be the one cut off.
      {{kRefused, kRefused, kRefused},
       KvErrorKind::kUnreachable,
       "no etcd member answered the put,"},
  };
  for (const auto& one : cases) {
    const auto endpoints = members(static_cast<int>(one.troubles.size()));
    const auto failure = verdict(endpoints, one.troubles);
    INFO(failure.message);
    CHECK(failure.kind == one.kind);
    CHECK_THAT(failure.message, Catch::Contains(one.headline));
  }
}

TEST_CASE("FailoverLog: malformed replies and TLS failures say so", "[etcd]") {
  const auto endpoints = members(2);  // the log keeps a reference
  FailoverLog log(endpoints);
  log.record(0, Trouble::kProtocol, "junk");
  log.record(1, Trouble::kTls, "handshake");
  CHECK_FALSE(log.usable(0));
  CHECK_FALSE(log.usable(1));
  CHECK_FALSE(log.any_usable());
  CHECK(log.summary("range", std::chrono::milliseconds(3)).kind == KvErrorKind::kProtocol);
  const auto tls = verdict(endpoints, {Trouble::kTls, Trouble::kUnreachable});
  CHECK(tls.kind == KvErrorKind::kUnreachable);
  CHECK_THAT(tls.message, Catch::Contains("no TLS connection"));
}

TEST_CASE("FailoverLog: a member that was once without leader marks the quorum lost", "[etcd]") {
  // It said "no leader", then timed out while it still believed in a new leader that never came.
  const auto endpoints = members(3);
  FailoverLog log(endpoints);
  log.record(2, Trouble::kNoLeader, "no leader");
  log.record(2, Trouble::kUnresponsive, "timed out");
  CHECK(log.usable(2));
  CHECK(log.summary("txn", std::chrono::milliseconds(1)).kind == KvErrorKind::kRejected);
}
