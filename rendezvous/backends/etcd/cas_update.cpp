// CasUpdate: read, decide, txn with a fence; settle unknown outcomes through the fence.

#include "rendezvous/backends/etcd/cas_update.hpp"

#include <algorithm>

#include "rendezvous/backends/etcd/etcd_codec.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

std::optional<EtcdKeyValue> first(RangeReply range) {
  if (range.kvs.empty()) {
    return std::nullopt;
  }
  return std::move(range.kvs.front());
}

}  // namespace

CasUpdate::CasUpdate(EtcdClient& client, LeaseKeeper& lease, std::string key,
                     std::function<std::string()> new_fence_key, Rule rule, Fencing fencing,
                     Clock::time_point deadline, std::function<void(round::KvResult)> done)
    : client_(client),
      lease_keeper_(lease),
      key_(std::move(key)),
      new_fence_key_(std::move(new_fence_key)),
      rule_(std::move(rule)),
      fencing_(fencing),
      deadline_(deadline),
      done_(std::move(done)),
      fence_key_(new_fence_key_()) {}

void CasUpdate::start() {
  read();  // the lease, for the fence, only once there is something to write
}

round::KvError CasUpdate::error(round::KvErrorKind kind, const std::string& what) const {
  return round::KvError{kind, client_.describe() + ": " + what};
}

void CasUpdate::acquire_lease() {
  lease_keeper_.acquire(deadline_,
                        lifetime_.guard([this](std::variant<std::int64_t, EtcdFailure> lease) {
                          if (auto* failure = std::get_if<EtcdFailure>(&lease)) {
                            finish(to_kv_error(*failure));
                            return;
                          }
                          lease_ = std::get<std::int64_t>(lease);
                          if (plan_) {
                            write();  // the lease was renewed after a txn found it gone
                          } else {
                            read();
                          }
                        }));
}

void CasUpdate::read() {
  client_.call("/v3/kv/range", EtcdCodec::range(RangeRequest{key_, {}}), EtcdClient::Retry::kAlways,
               deadline_, lifetime_.guard([this](EtcdClient::Outcome outcome) {
                 if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
                   finish(to_kv_error(*failure));
                   return;
                 }
                 try {
                   decide(first(EtcdCodec::decode_range(std::get<nlohmann::json>(outcome))));
                 } catch (const EtcdProtocolError& bad) {
                   finish(error(round::KvErrorKind::kProtocol,
                                std::string("bad range reply: ") + bad.what()));
                 }
               }));
}

void CasUpdate::decide(const std::optional<EtcdKeyValue>& current) {
  if (Clock::now() >= deadline_) {
    finish(error(round::KvErrorKind::kUnresponsive,
                 "gave up updating a contended key before the failover budget ran out"));
    return;
  }
  current_ = current;
  auto decision = rule_(current ? std::optional<std::string>(current->value) : std::nullopt);
  if (auto* refused = std::get_if<round::KvError>(&decision)) {
    finish(std::move(*refused));
    return;
  }
  plan_ = std::move(std::get<Plan>(decision));
  if (!plan_->desired) {
    finish(std::move(plan_->answer));
    return;
  }
  if (fencing_ == Fencing::kFence && lease_ == 0) {
    acquire_lease();  // then writes
    return;
  }
  write();
}

void CasUpdate::write() {
  TxnRequest txn;
  if (current_) {
    txn.compare.push_back({key_, TxnCompare::Target::kModRevision, current_->mod_revision, {}});
  } else {
    txn.compare.push_back({key_, TxnCompare::Target::kCreateRevision, 0, {}});
  }
  const bool fenced = fencing_ == Fencing::kFence;
  txn.success.emplace_back(PutRequest{key_, *plan_->desired, 0});
  txn.failure.emplace_back(RangeRequest{key_, {}});
  if (fenced) {
    txn.compare.push_back({fence_key_, TxnCompare::Target::kCreateRevision, 0, {}});
    txn.success.emplace_back(PutRequest{fence_key_, std::string(kFenceApplied), lease_});
    txn.failure.emplace_back(RangeRequest{fence_key_, {}});
  }
  client_.call(
      "/v3/kv/txn", EtcdCodec::txn(txn), EtcdClient::Retry::kUnlessMaybeApplied, deadline_,
      lifetime_.guard([this, fenced](EtcdClient::Outcome outcome) {
        if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
          if (failure->maybe_applied) {
            if (fenced) {
              settle();
            } else {
              read();  // the rule sees the attempt's value if it was applied
            }
          } else if (fenced && failure->code == kGrpcNotFound) {
            // The lease expired (txn refused as a whole): take a new one and write again.
            lease_keeper_.forget(lease_);
            acquire_lease();
          } else {
            finish(to_kv_error(*failure));
          }
          return;
        }
        try {
          auto reply = EtcdCodec::decode_txn(std::get<nlohmann::json>(outcome));
          if (reply.succeeded) {
            finish(std::move(plan_->answer));
            return;
          }
          const std::size_t reads = fenced ? 2 : 1;
          if (reply.responses.size() != reads ||
              !std::all_of(reply.responses.begin(), reply.responses.end(), [](const auto& read) {
                return std::holds_alternative<RangeReply>(read);
              })) {
            throw EtcdProtocolError("a failed txn without the reads of its failure branch");
          }
          if (fenced && !std::get<RangeReply>(reply.responses[1]).kvs.empty()) {
            throw EtcdProtocolError("the fence key " + fence_key_ + " exists before its write");
          }
          decide(first(std::move(std::get<RangeReply>(reply.responses[0]))));
        } catch (const EtcdProtocolError& bad) {
          finish(error(round::KvErrorKind::kProtocol, std::string("bad txn reply: ") + bad.what()));
        }
      }));
}

void CasUpdate::settle() {
  TxnRequest txn;
  txn.compare.push_back({fence_key_, TxnCompare::Target::kCreateRevision, 0, {}});
  txn.success.emplace_back(PutRequest{fence_key_, std::string(kFenceFenced), lease_});
  txn.failure.emplace_back(RangeRequest{fence_key_, {}});
  // Repeating this txn is harmless: a second run finds the fence it wrote.
  client_.call(
      "/v3/kv/txn", EtcdCodec::txn(txn), EtcdClient::Retry::kAlways, deadline_,
      lifetime_.guard([this](EtcdClient::Outcome outcome) {
        if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
          const std::string unknown = "; whether the update of " + key_ + " was applied is unknown";
          if (failure->code == kGrpcNotFound) {
            finish(error(round::KvErrorKind::kRejected,
                         "this agent's lease expired while an update was in doubt" + unknown));
          } else {
            finish(round::KvError{failure->kind, failure->message + unknown});
          }
          return;
        }
        try {
          const auto reply = EtcdCodec::decode_txn(std::get<nlohmann::json>(outcome));
          bool applied = false;
          if (!reply.succeeded) {
            if (reply.responses.size() != 1 ||
                !std::holds_alternative<RangeReply>(reply.responses[0])) {
              throw EtcdProtocolError("a failed fence txn without the read of the fence");
            }
            const auto& kvs = std::get<RangeReply>(reply.responses[0]).kvs;
            applied = !kvs.empty() && kvs.front().value == kFenceApplied;
          }
          if (applied) {
            finish(std::move(plan_->answer));
            return;
          }
          // The attempt never happened and never will: start over with a new fence.
          fence_key_ = new_fence_key_();
          plan_.reset();
          read();
        } catch (const EtcdProtocolError& bad) {
          finish(error(round::KvErrorKind::kProtocol,
                       std::string("bad fence txn reply: ") + bad.what()));
        }
      }));
}

void CasUpdate::finish(round::KvResult result) {
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) {
    done(std::move(result));
  }
}

}  // namespace ddprun::rendezvous::backends::etcd
