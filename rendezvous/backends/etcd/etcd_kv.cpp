// EtcdKv: dispatch of the round machine's ops onto etcd requests, and the op bookkeeping
// (ids, cancel, posted completions, close).

#include "rendezvous/backends/etcd/etcd_kv.hpp"

#include <algorithm>
#include <charconv>
#include <random>
#include <unordered_map>

#include "common/random.hpp"
#include "rendezvous/backends/etcd/etcd_codec.hpp"
#include "rendezvous/backends/etcd/key_waiter.hpp"
#include "rendezvous/backends/etcd/txn_batch.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

EtcdOptions validated(EtcdOptions options) {
  validate(options);
  return options;
}

// The counter a key holds: decimal text, as TCPStore's add writes it.
std::optional<int64_t> parse_counter(const std::string& text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

EtcdKv::EtcdKv(boost::asio::io_context& io, EtcdOptions options)
    : io_(io),
      options_(validated(std::move(options))),
      client_(io, options_),
      lease_(client_, options_.lease_ttl, options_.keepalive_interval),
      nonce_(common::random_hex(8)) {}

EtcdKv::~EtcdKv() {
  // Pending ops are abandoned: their work objects go first, then the client closes sockets.
  pending_.clear();
  beat_watch_.reset();
  client_.close();
}

std::string EtcdKv::describe() const {
  return client_.describe();
}

round::KvError EtcdKv::protocol_error(const std::string& what) const {
  return round::KvError{round::KvErrorKind::kProtocol, describe() + ": " + what};
}

std::string EtcdKv::new_fence_key() {
  return options_.key_prefix + std::string(kInternalDirectory) + "fence/" + nonce_ + "/" +
         std::to_string(++next_fence_);
}

// --- op bookkeeping -------------------------------------------------------------------------

uint64_t EtcdKv::begin(uint64_t id, Completion done) {
  const uint64_t serial = ++next_serial_;
  if (const auto previous = serial_of_.find(id); previous != serial_of_.end()) {
    // The caller reused a pending id: the older op can no longer be cancelled by it.
    serial_of_.erase(previous);
  }
  serial_of_[id] = serial;
  pending_[serial] = Pending{id, std::move(done), nullptr, std::nullopt, false};
  return serial;
}

void EtcdKv::adopt(uint64_t serial, std::shared_ptr<void> work) {
  if (auto entry = pending_.find(serial); entry != pending_.end()) {
    entry->second.work = std::move(work);
  }
}

void EtcdKv::finish(uint64_t serial, round::KvResult result) {
  const auto entry = pending_.find(serial);
  if (entry == pending_.end() || entry->second.result) {
    return;
  }
  entry->second.result = std::move(result);
  // Delivered from a fresh call stack: the completion may start ops, cancel, or destroy us.
  boost::asio::post(io_, lifetime_.guard([this, serial] { deliver(serial); }));
}

void EtcdKv::deliver(uint64_t serial) {
  const auto entry = pending_.find(serial);
  if (entry == pending_.end()) {
    return;  // cancelled meanwhile
  }
  Pending pending = std::move(entry->second);
  pending_.erase(entry);
  if (const auto id = serial_of_.find(pending.id); id != serial_of_.end() && id->second == serial) {
    serial_of_.erase(id);
  }
  pending.work.reset();
  maybe_finish_close();
  pending.done(std::move(*pending.result));
}

void EtcdKv::cancel(uint64_t id) {
  const auto found = serial_of_.find(id);
  if (found == serial_of_.end()) {
    return;
  }
  pending_.erase(found->second);  // destroys the work: a KeyWaiter closes its watch
  serial_of_.erase(found);
  maybe_finish_close();
}

void EtcdKv::close(std::function<void()> done) {
  if (closing_ || closed_) {
    boost::asio::post(io_, std::move(done));
    return;
  }
  closing_ = true;
  close_done_ = std::move(done);
  beat_watch_.reset();
  // A wait could last its whole timeout: leaving does not wait for it.
  std::vector<uint64_t> waits;
  for (const auto& [serial, pending] : pending_) {
    if (pending.is_wait) {
      waits.push_back(serial);
    }
  }
  for (const uint64_t serial : waits) {
    finish(serial, round::KvError{round::KvErrorKind::kUnreachable,
                                  describe() + ": the backend is closing"});
  }
  maybe_finish_close();
}

void EtcdKv::maybe_finish_close() {
  if (!closing_ || closed_ || !pending_.empty()) {
    return;
  }
  closed_ = true;
  lease_.revoke(deadline(), lifetime_.guard([this] {
    client_.close();
    auto done = std::move(close_done_);
    close_done_ = nullptr;
    if (done) {
      boost::asio::post(io_, std::move(done));
    }
  }));
}

// --- the ops --------------------------------------------------------------------------------

template <>
void EtcdKv::run(uint64_t serial, round::KvGet op) {
  client_.call("/v3/kv/range", EtcdCodec::range(RangeRequest{full_key(op.key), {}}),
               EtcdClient::Retry::kAlways, deadline(),
               lifetime_.guard([this, serial](EtcdClient::Outcome outcome) {
                 if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
                   finish(serial, to_kv_error(*failure));
                   return;
                 }
                 try {
                   auto range = EtcdCodec::decode_range(std::get<nlohmann::json>(outcome));
                   round::KvValue value;
                   if (!range.kvs.empty()) {
                     value.value = std::move(range.kvs.front().value);
                   }
                   finish(serial, std::move(value));
                 } catch (const EtcdProtocolError& bad) {
                   finish(serial, protocol_error(std::string("bad range reply: ") + bad.what()));
                 }
               }));
}

template <>
void EtcdKv::run(uint64_t serial, round::KvMultiGet op) {
  if (op.keys.empty()) {
    finish(serial, round::KvValues{});
    return;
  }
  std::vector<TxnOperation> reads;
  std::set<std::string> unique;
  for (const auto& key : op.keys) {
    if (unique.insert(full_key(key)).second) {
      reads.emplace_back(RangeRequest{full_key(key), {}});
    }
  }
  auto batch = std::make_shared<TxnBatch>(
      client_, TxnBatch::split(std::move(reads)), deadline(),
      lifetime_.guard([this, serial, keys = std::move(op.keys)](TxnBatch::Result result) {
        if (auto* failure = std::get_if<round::KvError>(&result)) {
          finish(serial, std::move(*failure));
          return;
        }
        std::unordered_map<std::string, std::string> found;
        for (auto& reply : std::get<std::vector<TxnReply>>(result)) {
          for (auto& response : reply.responses) {
            for (auto& kv : std::get<RangeReply>(response).kvs) {
              found[std::move(kv.key)] = std::move(kv.value);
            }
          }
        }
        round::KvValues values;
        values.values.reserve(keys.size());
        for (const auto& key : keys) {
          const auto hit = found.find(full_key(key));
          values.values.push_back(hit == found.end() ? std::nullopt
                                                     : std::optional<std::string>(hit->second));
        }
        finish(serial, std::move(values));
      }));
  batch->start();
  adopt(serial, std::move(batch));
}

template <>
void EtcdKv::run(uint64_t serial, round::KvSet op) {
  client_.call("/v3/kv/put", EtcdCodec::put(PutRequest{full_key(op.key), std::move(op.value), 0}),
               EtcdClient::Retry::kAlways, deadline(),
               lifetime_.guard([this, serial](EtcdClient::Outcome outcome) {
                 if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
                   finish(serial, to_kv_error(*failure));
                   return;
                 }
                 finish(serial, round::KvDone{});
               }));
}

template <>
void EtcdKv::run(uint64_t serial, round::KvMultiSet op) {
  if (op.keys.size() != op.values.size()) {
    finish(serial,
           round::KvError{round::KvErrorKind::kRejected,
                          describe() + ": a multi-set with " + std::to_string(op.keys.size()) +
                              " keys and " + std::to_string(op.values.size()) + " values"});
    return;
  }
  if (op.keys.empty()) {
    finish(serial, round::KvDone{});
    return;
  }
  // etcd refuses a txn that writes one key twice: the last value of a key wins, as it would
  // with one set after another.
  std::unordered_map<std::string, std::size_t> last;
  for (std::size_t i = 0; i < op.keys.size(); ++i) {
    last[op.keys[i]] = i;
  }
  std::vector<TxnOperation> writes;
  for (std::size_t i = 0; i < op.keys.size(); ++i) {
    if (last[op.keys[i]] == i) {
      writes.emplace_back(PutRequest{full_key(op.keys[i]), std::move(op.values[i]), 0});
    }
  }
  auto batch =
      std::make_shared<TxnBatch>(client_, TxnBatch::split(std::move(writes)), deadline(),
                                 lifetime_.guard([this, serial](TxnBatch::Result result) {
                                   if (auto* failure = std::get_if<round::KvError>(&result)) {
                                     finish(serial, std::move(*failure));
                                     return;
                                   }
                                   finish(serial, round::KvDone{});
                                 }));
  batch->start();
  adopt(serial, std::move(batch));
}

void EtcdKv::update(uint64_t serial, const std::string& key, CasUpdate::Rule rule,
                    CasUpdate::Fencing fencing) {
  auto update = std::make_shared<CasUpdate>(
      client_, lease_, full_key(key), [this] { return new_fence_key(); }, std::move(rule), fencing,
      deadline(), lifetime_.guard([this, serial](round::KvResult result) {
        finish(serial, std::move(result));
      }));
  update->start();
  adopt(serial, std::move(update));
}

template <>
void EtcdKv::run(uint64_t serial, round::KvAdd op) {
  update(serial, op.key,
         [key = op.key, delta = op.delta,
          where = describe()](const std::optional<std::string>& current)
             -> std::variant<CasUpdate::Plan, round::KvError> {
           int64_t value = 0;
           if (current) {
             const auto parsed = parse_counter(*current);
             if (!parsed) {
               return round::KvError{round::KvErrorKind::kRejected,
                                     where + ": add to key '" + key +
                                         "', which holds a value that is not a decimal counter"};
             }
             value = *parsed;
           }
           int64_t sum = 0;
           if (__builtin_add_overflow(value, delta, &sum)) {
             return round::KvError{round::KvErrorKind::kRejected,
                                   where + ": add to key '" + key + "' overflows int64"};
           }
           return CasUpdate::Plan{std::to_string(sum), round::KvCounter{sum}};
         });
}

template <>
void EtcdKv::run(uint64_t serial, round::KvCompareSet op) {
  update(
      serial, op.key,
      [expected = std::move(op.expected),
       desired = std::move(op.desired)](const std::optional<std::string>& current)
          -> std::variant<CasUpdate::Plan, round::KvError> {
        if (current == expected) {
          return CasUpdate::Plan{desired, round::KvValue{desired}};
        }
        return CasUpdate::Plan{std::nullopt, round::KvValue{current}};
      },
      CasUpdate::Fencing::kNone);
}

template <>
void EtcdKv::run(uint64_t serial, round::KvAppend op) {
  update(serial, op.key,
         [suffix = std::move(op.value)](const std::optional<std::string>& current)
             -> std::variant<CasUpdate::Plan, round::KvError> {
           return CasUpdate::Plan{current.value_or(std::string()) + suffix, round::KvDone{}};
         });
}

template <>
void EtcdKv::run(uint64_t serial, round::KvWait op) {
  if (op.keys.empty()) {
    finish(serial, round::KvReady{true});
    return;
  }
  std::vector<std::string> keys;
  keys.reserve(op.keys.size());
  for (const auto& key : op.keys) {
    keys.push_back(full_key(key));
  }
  auto waiter = std::make_shared<KeyWaiter>(client_, std::move(keys), op.timeout,
                                            lifetime_.guard([this, serial](round::KvResult result) {
                                              finish(serial, std::move(result));
                                            }));
  waiter->start();
  adopt(serial, std::move(waiter));
  pending_[serial].is_wait = true;
}

template <>
void EtcdKv::run(uint64_t serial, round::KvBeat op) {
  beat(serial, full_key(op.key), deadline(), false);
}

void EtcdKv::beat(uint64_t serial, std::string key, Clock::time_point until, bool renewed) {
  lease_.acquire(until, lifetime_.guard([this, serial, key = std::move(key), until, renewed](
                                            std::variant<int64_t, EtcdFailure> lease) mutable {
    if (auto* failure = std::get_if<EtcdFailure>(&lease)) {
      finish(serial, to_kv_error(*failure));
      return;
    }
    const int64_t id = std::get<int64_t>(lease);
    if (const auto& trouble = lease_.trouble()) {
      finish(serial, to_kv_error(*trouble));  // renewals fail: this agent may look dead
      return;
    }
    if (const auto put = beat_leases_.find(key); put != beat_leases_.end() && put->second == id) {
      finish(serial, round::KvDone{});
      return;
    }
    client_.call(
        "/v3/kv/put", EtcdCodec::put(PutRequest{key, std::string(kBeatValue), id}),
        EtcdClient::Retry::kAlways, until,
        lifetime_.guard([this, serial, key, until, renewed, id](EtcdClient::Outcome outcome) {
          if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
            if (failure->code == kGrpcNotFound && !renewed) {
              lease_.forget(id);  // expired: take a new lease, put the key again
              beat(serial, key, until, true);
              return;
            }
            finish(serial, to_kv_error(*failure));
            return;
          }
          beat_leases_[key] = id;
          finish(serial, round::KvDone{});
        }));
  }));
}

// Probes come every check period; once the key was found, its watch answers them, so they
// cost etcd nothing (the key only vanishes with its owner's lease: a delete event).
template <>
void EtcdKv::run(uint64_t serial, round::KvProbe op) {
  if (beat_watch_ && beat_watch_->key() == full_key(op.key) && !beat_watch_->broken()) {
    finish(serial, beat_watch_->present() ? round::KvLiveness{++probe_counter_, false}
                                          : round::KvLiveness{0, true});
    return;
  }
  beat_watch_.reset();
  read_range(serial, RangeRequest{full_key(op.key), {}},
             [this, serial, key = op.key](const RangeReply& range) {
               if (!range.kvs.empty()) {
                 seen_alive_.insert(key);
                 if (!closing_ && !beat_watch_) {
                   beat_watch_ =
                       std::make_unique<BeatWatch>(client_, full_key(key), range.revision);
                   beat_watch_->start();
                 }
                 finish(serial, round::KvLiveness{++probe_counter_, false});
               } else {
                 finish(serial, round::KvLiveness{0, seen_alive_.contains(key)});
               }
             });
}

void EtcdKv::read_range(uint64_t serial, const RangeRequest& request,
                        std::function<void(const RangeReply&)> then) {
  client_.call("/v3/kv/range", EtcdCodec::range(request), EtcdClient::Retry::kAlways, deadline(),
               lifetime_.guard([this, serial, then = std::move(then)](EtcdClient::Outcome outcome) {
                 if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
                   finish(serial, to_kv_error(*failure));
                   return;
                 }
                 try {
                   then(EtcdCodec::decode_range(std::get<nlohmann::json>(outcome)));
                 } catch (const EtcdProtocolError& bad) {
                   finish(serial, protocol_error(std::string("bad range reply: ") + bad.what()));
                 }
               }));
}

// A ticket is the key <key>/<member>; its position is how many tickets were created up to its
// own put (revisions are global and monotonic, tickets are never deleted), so draws by many
// agents never conflict. One txn draws it: the put, then a count of the tickets, which inside
// the txn sees the store just after the put (etcd reads a write txn at its own revision): one
// request and one raft write per draw. A retried draw whose first try was applied finds the
// ticket (the failure branch) and counts the tickets created up to it instead.
template <>
void EtcdKv::run(uint64_t serial, round::KvTakeTicket op) {
  const std::string prefix = full_key(op.key) + "/";
  const std::string ticket = prefix + op.member;
  TxnRequest txn;
  txn.compare.push_back({ticket, TxnCompare::Target::kCreateRevision, 0, {}});
  txn.success.emplace_back(PutRequest{ticket, "1", 0});
  txn.success.emplace_back(RangeRequest{prefix, EtcdCodec::prefix_end(prefix), true, 0, false});
  txn.failure.emplace_back(RangeRequest{ticket, {}});
  client_.call(
      "/v3/kv/txn", EtcdCodec::txn(txn), EtcdClient::Retry::kAlways, deadline(),
      lifetime_.guard([this, serial, key = op.key](EtcdClient::Outcome outcome) {
        if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
          finish(serial, to_kv_error(*failure));
          return;
        }
        try {
          const auto reply = EtcdCodec::decode_txn(std::get<nlohmann::json>(outcome));
          const auto* read =
              reply.responses.empty() ? nullptr : std::get_if<RangeReply>(&reply.responses.back());
          if (read == nullptr) {
            throw EtcdProtocolError("a ticket txn without its read");
          }
          if (reply.succeeded) {
            finish(serial, round::KvCounter{read->count});
          } else if (read->kvs.empty() || read->kvs.front().create_revision <= 0) {
            throw EtcdProtocolError("a ticket txn failed, yet its ticket does not exist");
          } else {
            count_tickets(serial, key, read->kvs.front().create_revision);
          }
        } catch (const EtcdProtocolError& bad) {
          finish(serial, protocol_error(std::string("bad ticket txn reply: ") + bad.what()));
        }
      }));
}

template <>
void EtcdKv::run(uint64_t serial, round::KvCountTickets op) {
  count_tickets(serial, op.key, 0);
}

void EtcdKv::count_tickets(uint64_t serial, const std::string& key, std::int64_t up_to_revision) {
  const std::string prefix = full_key(key) + "/";
  if (up_to_revision <= 0) {
    read_range(
        serial, RangeRequest{prefix, EtcdCodec::prefix_end(prefix), true, 0, false},
        [this, serial](const RangeReply& range) { finish(serial, round::KvCounter{range.count}); });
    return;
  }
  // A ticket's position: etcd filters by create revision only the keys it returns, so fetch
  // the keys (no values) and count those created up to the ticket's own put.
  read_range(serial,
             RangeRequest{prefix, EtcdCodec::prefix_end(prefix), false, up_to_revision, true},
             [this, serial, up_to_revision](const RangeReply& range) {
               const auto count =
                   std::count_if(range.kvs.begin(), range.kvs.end(), [&](const EtcdKeyValue& kv) {
                     return kv.create_revision > 0 && kv.create_revision <= up_to_revision;
                   });
               finish(serial, round::KvCounter{static_cast<std::int64_t>(count)});
             });
}

// After the ops: std::visit instantiates run<Op>, which must follow its specializations.
void EtcdKv::start(uint64_t id, round::KvOp op, Completion done) {
  const uint64_t serial = begin(id, std::move(done));
  if (closing_ || closed_) {
    finish(serial, round::KvError{round::KvErrorKind::kUnreachable,
                                  describe() + ": the backend is closed"});
    return;
  }
  std::visit([this, serial](auto& concrete) { run(serial, std::move(concrete)); }, op);
}

}  // namespace ddprun::rendezvous::backends::etcd
