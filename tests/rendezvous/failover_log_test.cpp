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

TEST_CASE("FailoverLog: most members refused and a listening one could not serve: lost quorum",
          "[etcd]") {
  // Whether the survivor said "no leader" or let the request time out, the verdict is one.
  for (const auto survivor : {Trouble::kUnresponsive, Trouble::kNoLeader}) {
    const auto failure =
        verdict(members(3), {Trouble::kUnreachable, Trouble::kUnreachable, survivor});
    CHECK(failure.kind == KvErrorKind::kRejected);
    CHECK_THAT(failure.message, Catch::Contains("lost quorum"));
  }
  const auto five =
      verdict(members(5), {Trouble::kUnreachable, Trouble::kUnreachable, Trouble::kUnreachable,
                           Trouble::kUnresponsive, Trouble::kUnresponsive});
  CHECK(five.kind == KvErrorKind::kRejected);
}

TEST_CASE("FailoverLog: a minority refused and the rest slow is no lost quorum", "[etcd]") {
  const auto slow =
      verdict(members(3), {Trouble::kUnreachable, Trouble::kUnresponsive, Trouble::kUnresponsive});
  CHECK(slow.kind == KvErrorKind::kUnresponsive);
  CHECK_THAT(slow.message, Catch::Contains("no etcd member answered the put in time"));
  // Half is no majority.
  const auto half = verdict(members(4), {Trouble::kUnreachable, Trouble::kUnreachable,
                                         Trouble::kUnresponsive, Trouble::kUnresponsive});
  CHECK(half.kind == KvErrorKind::kUnresponsive);
}

TEST_CASE("FailoverLog: every member refused is unreachable, not a lost quorum", "[etcd]") {
  // The client may be the one cut off: nothing says the cluster lost anything.
  const auto failure =
      verdict(members(3), {Trouble::kUnreachable, Trouble::kUnreachable, Trouble::kUnreachable});
  CHECK(failure.kind == KvErrorKind::kUnreachable);
  CHECK_THAT(failure.message, Catch::Contains("no etcd member answered the put,"));
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
