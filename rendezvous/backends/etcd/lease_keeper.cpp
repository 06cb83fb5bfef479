// LeaseKeeper: grant on demand, renew on a timer, revoke on close.

#include "rendezvous/backends/etcd/lease_keeper.hpp"

#include <algorithm>

#include "rendezvous/backends/etcd/etcd_codec.hpp"

namespace ddprun::rendezvous::backends::etcd {

LeaseKeeper::LeaseKeeper(EtcdClient& client, std::chrono::seconds ttl,
                         std::chrono::milliseconds interval)
    : client_(client), ttl_(ttl), interval_(interval), timer_(client.io()) {}

void LeaseKeeper::acquire(Clock::time_point deadline, LeaseHandler done) {
  if (revoked_) {
    boost::asio::post(client_.io(), [done = std::move(done), what = client_.describe()] {
      done(EtcdFailure{round::KvErrorKind::kUnreachable, what + ": the backend is closed"});
    });
    return;
  }
  if (lease_ != 0) {
    boost::asio::post(client_.io(), [done = std::move(done), lease = lease_] { done(lease); });
    return;
  }
  waiting_.push_back(std::move(done));
  if (!granting_) {
    grant(deadline);
  }
}

void LeaseKeeper::grant(Clock::time_point deadline) {
  granting_ = true;
  // A grant whose reply is lost leaves an unused lease behind; it expires on its own.
  client_.call(
      "/v3/lease/grant", EtcdCodec::lease_grant(ttl_.count()), EtcdClient::Retry::kAlways, deadline,
      lifetime_.guard([this](EtcdClient::Outcome outcome) {
        granting_ = false;
        std::variant<std::int64_t, EtcdFailure> result;
        if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
          result = std::move(*failure);
        } else {
          try {
            const auto grant = EtcdCodec::decode_lease_grant(std::get<nlohmann::json>(outcome));
            result = grant.id;
          } catch (const EtcdProtocolError& error) {
            result = EtcdFailure{round::KvErrorKind::kProtocol,
                                 client_.describe() + ": bad lease grant reply: " + error.what()};
          }
        }
        if (revoked_) {
          if (const auto* lease = std::get_if<std::int64_t>(&result)) {
            // Granted while closing: give it back rather than let it run its TTL.
            client_.call("/v3/lease/revoke", EtcdCodec::lease_revoke(*lease),
                         EtcdClient::Retry::kAlways, Clock::now() + client_.options().op_timeout,
                         [](const EtcdClient::Outcome&) {});
          }
          result = EtcdFailure{round::KvErrorKind::kUnreachable,
                               client_.describe() + ": the backend is closed"};
        } else if (const auto* lease = std::get_if<std::int64_t>(&result)) {
          lease_ = *lease;
          ++generation_;
          trouble_.reset();
          schedule_renewal();
        }
        auto waiting = std::move(waiting_);
        waiting_.clear();
        for (auto& done : waiting) {
          done(result);
        }
      }));
}

std::optional<EtcdFailure> LeaseKeeper::trouble() const {
  if (trouble_ && failing_since_ &&
      Clock::now() - *failing_since_ >= client_.options().failover_budget) {
    return trouble_;
  }
  return std::nullopt;
}

void LeaseKeeper::forget(std::int64_t id) {
  if (id != 0 && id == lease_) {
    lease_ = 0;
    ++generation_;
    timer_.cancel();
  }
}

void LeaseKeeper::schedule_renewal() {
  timer_.expires_after(interval_);
  timer_.async_wait(lifetime_.guard([this](const boost::system::error_code& ec) {
    if (!ec && lease_ != 0 && !revoked_) {
      renew();
    }
  }));
}

void LeaseKeeper::renew() {
  const std::int64_t lease = lease_;
  const std::uint64_t generation = generation_;
  // Renewals go on however long they failed: only etcd's answer (a TTL of 0) says the lease is
  // gone. A new leader extends every lease by the election timeout, so a lease unrenewed for a
  // whole TTL of our clock may well be alive, and abandoning it would leave this agent's
  // heartbeat key to expire with it before a new lease carries the key: a gap in which the
  // peers see this node as lost.
  schedule_renewal();
  if (renewing_) {
    return;  // the previous renewal is still trying other members
  }
  renewing_ = true;
  const auto deadline = Clock::now() + std::max(interval_, client_.options().op_timeout);
  client_.call(
      "/v3/lease/keepalive", EtcdCodec::lease_keepalive(lease), EtcdClient::Retry::kAlways,
      deadline, lifetime_.guard([this, lease, generation](EtcdClient::Outcome outcome) {
        renewing_ = false;
        if (generation != generation_) {
          return;
        }
        if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
          trouble_ = std::move(*failure);
          if (!failing_since_) {
            failing_since_ = Clock::now();
          }
          return;
        }
        try {
          const auto reply = EtcdCodec::decode_keepalive(std::get<nlohmann::json>(outcome));
          trouble_.reset();
          failing_since_.reset();
          if (reply.ttl_seconds <= 0) {
            forget(lease);
          }
        } catch (const EtcdProtocolError& error) {
          trouble_ = EtcdFailure{round::KvErrorKind::kProtocol,
                                 client_.describe() + ": bad keep-alive reply: " + error.what()};
          if (!failing_since_) {
            failing_since_ = Clock::now();
          }
        }
      }));
}

void LeaseKeeper::revoke(Clock::time_point deadline, std::function<void()> done) {
  revoked_ = true;
  timer_.cancel();
  const std::int64_t lease = lease_;
  lease_ = 0;
  ++generation_;
  if (lease == 0) {
    boost::asio::post(client_.io(), std::move(done));
    return;
  }
  // A lease already gone answers 404, which is fine too.
  client_.call("/v3/lease/revoke", EtcdCodec::lease_revoke(lease), EtcdClient::Retry::kAlways,
               deadline,
               lifetime_.guard([done = std::move(done)](const EtcdClient::Outcome&) { done(); }));
}

}  // namespace ddprun::rendezvous::backends::etcd
