// TxnBatch: splitting operations into etcd-sized txns and running them in order.

#include "rendezvous/backends/etcd/txn_batch.hpp"

#include "rendezvous/backends/etcd/etcd_codec.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

// What an operation adds to a txn body, roughly: base64 grows bytes by 4/3, plus field names.
std::size_t payload_bytes(const TxnOperation& operation) {
  constexpr std::size_t kOverhead = 64;
  if (const auto* put = std::get_if<PutRequest>(&operation)) {
    return (put->key.size() + put->value.size()) * 4 / 3 + kOverhead;
  }
  const auto& range = std::get<RangeRequest>(operation);
  return (range.key.size() + range.range_end.size()) * 4 / 3 + kOverhead;
}

}  // namespace

std::vector<TxnRequest> TxnBatch::split(std::vector<TxnOperation> operations) {
  std::vector<TxnRequest> txns;
  std::size_t bytes = 0;
  for (auto& operation : operations) {
    const std::size_t size = payload_bytes(operation);
    if (txns.empty() || txns.back().success.size() >= kMaxTxnOperations ||
        (bytes + size > kMaxTxnPayloadBytes && !txns.back().success.empty())) {
      txns.emplace_back();
      bytes = 0;
    }
    bytes += size;
    txns.back().success.push_back(std::move(operation));
  }
  return txns;
}

TxnBatch::TxnBatch(EtcdClient& client, std::vector<TxnRequest> txns, Clock::time_point deadline,
                   std::function<void(Result)> done)
    : client_(client), txns_(std::move(txns)), deadline_(deadline), done_(std::move(done)) {}

void TxnBatch::start() {
  boost::asio::post(client_.io(), lifetime_.guard([this] { run_next(); }));
}

void TxnBatch::run_next() {
  if (replies_.size() == txns_.size()) {
    done_(std::move(replies_));
    return;
  }
  const auto& txn = txns_[replies_.size()];
  client_.call("/v3/kv/txn", EtcdCodec::txn(txn), EtcdClient::Retry::kAlways, deadline_,
               lifetime_.guard([this, expected = txn.success.size()](EtcdClient::Outcome outcome) {
                 if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
                   done_(to_kv_error(*failure));
                   return;
                 }
                 try {
                   auto reply = EtcdCodec::decode_txn(std::get<nlohmann::json>(outcome));
                   if (!reply.succeeded || reply.responses.size() != expected) {
                     throw EtcdProtocolError("a txn without compares did not run all of its " +
                                             std::to_string(expected) + " operations");
                   }
                   replies_.push_back(std::move(reply));
                 } catch (const EtcdProtocolError& bad) {
                   done_(round::KvError{round::KvErrorKind::kProtocol,
                                        client_.describe() + ": bad txn reply: " + bad.what()});
                   return;
                 }
                 run_next();
               }));
}

}  // namespace ddprun::rendezvous::backends::etcd
