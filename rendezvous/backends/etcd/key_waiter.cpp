// KeyWaiter: read, then watch the missing keys until they all exist or the timeout passes.

#include "rendezvous/backends/etcd/key_waiter.hpp"

#include <algorithm>
#include <limits>

namespace ddprun::rendezvous::backends::etcd {

KeyWaiter::KeyWaiter(EtcdClient& client, std::vector<std::string> keys,
                     std::chrono::milliseconds timeout, std::function<void(round::KvResult)> done)
    : client_(client),
      keys_(std::move(keys)),
      wanted_(keys_.begin(), keys_.end()),
      timeout_(timeout),
      done_(std::move(done)),
      timer_(client.io()) {}

KeyWaiter::~KeyWaiter() = default;

void KeyWaiter::start() {
  timer_.expires_after(std::max(timeout_, std::chrono::milliseconds(0)));
  timer_.async_wait(lifetime_.guard([this](const boost::system::error_code& ec) {
    if (ec) {
      return;
    }
    timed_out_ = true;
    // While the keys are being read, their answer decides (a zero timeout still checks once).
    if (!reading_) {
      finish(round::KvReady{false});
    }
  }));
  read();
}

void KeyWaiter::read() {
  reading_ = true;
  std::vector<TxnOperation> reads;
  for (const auto& key : wanted_) {
    reads.emplace_back(RangeRequest{key, {}});
  }
  read_ = std::make_unique<TxnBatch>(
      client_, TxnBatch::split(std::move(reads)),
      std::chrono::steady_clock::now() + client_.options().failover_budget,
      lifetime_.guard([this](TxnBatch::Result result) {
        reading_ = false;
        if (auto* failure = std::get_if<round::KvError>(&result)) {
          finish(std::move(*failure));
          return;
        }
        on_read(std::move(std::get<std::vector<TxnReply>>(result)));
      }));
  read_->start();
}

void KeyWaiter::on_read(std::vector<TxnReply> replies) {
  missing_ = wanted_;
  // Each txn read its keys at its own revision: watching from after the oldest one replays
  // anything that changed since any of them.
  std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
  for (const auto& reply : replies) {
    oldest = std::min(oldest, reply.revision);
    for (const auto& response : reply.responses) {
      for (const auto& kv : std::get<RangeReply>(response).kvs) {
        missing_.erase(kv.key);
        seen_[kv.key] = kv.value;
      }
    }
  }
  if (missing_.empty()) {
    finish_ready();
    return;
  }
  if (timed_out_) {
    finish(round::KvReady{false});
    return;
  }
  watch(oldest + 1);
}

void KeyWaiter::watch(std::int64_t from_revision) {
  // One watch over the span of the missing keys; events for other keys in it are ignored.
  const std::string& first = *missing_.begin();
  const std::string end = *missing_.rbegin() + std::string(1, '\0');
  retire_watch();
  watch_ = std::make_unique<WatchStream>(
      client_, first, end, from_revision,
      WatchStream::Handlers{
          .on_events = [this](const std::vector<WatchEvent>& events) { on_events(events); },
          .on_compacted =
              [this] {
                boost::asio::post(client_.io(), lifetime_.guard([this] {
                  if (!finished_) {
                    read();
                  }
                }));
              },
          .on_failure = [this](EtcdFailure failure) { finish(to_kv_error(failure)); }});
  watch_->start();
}

void KeyWaiter::on_events(const std::vector<WatchEvent>& events) {
  for (const auto& event : events) {
    if (!wanted_.contains(event.kv.key)) {
      continue;
    }
    if (event.deleted) {
      missing_.insert(event.kv.key);
      seen_.erase(event.kv.key);
    } else {
      missing_.erase(event.kv.key);
      seen_[event.kv.key] = event.kv.value;
    }
  }
  if (missing_.empty()) {
    finish_ready();
  }
}

void KeyWaiter::finish_ready() {
  round::KvReady ready(true);
  ready.values.reserve(keys_.size());
  for (const auto& key : keys_) {
    ready.values.push_back(seen_.at(key));
  }
  finish(std::move(ready));
}

void KeyWaiter::retire_watch() {
  // The watch may be the caller of this code: destroy it once the call stack unwound.
  if (watch_) {
    boost::asio::post(client_.io(), [watch = std::shared_ptr<WatchStream>(std::move(watch_))] {});
  }
}

void KeyWaiter::finish(round::KvResult result) {
  if (finished_) {
    return;
  }
  finished_ = true;
  timer_.cancel();
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace ddprun::rendezvous::backends::etcd
