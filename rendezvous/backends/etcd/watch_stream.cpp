// WatchStream: a watch that moves to another member when its member fails.

#include "rendezvous/backends/etcd/watch_stream.hpp"

#include <algorithm>

#include "rendezvous/backends/etcd/etcd_codec.hpp"
#include "rendezvous/backends/etcd/transport_trouble.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

using Trouble = FailoverLog::Trouble;
constexpr unsigned kHttpUnavailable = 503;

}  // namespace

WatchStream::WatchStream(EtcdClient& client, std::string key, std::string range_end,
                         std::int64_t start_revision, Handlers handlers)
    : client_(client),
      key_(std::move(key)),
      range_end_(std::move(range_end)),
      next_revision_(start_revision),
      handlers_(std::move(handlers)),
      member_(client.preferred_member()),
      backoff_(EtcdClient::kFirstBackoff),
      retry_timer_(client.io()) {}

WatchStream::~WatchStream() {
  if (connection_) {
    connection_->close();
  }
}

void WatchStream::start() {
  boost::asio::post(client_.io(), lifetime_.guard([this] { open(); }));
}

void WatchStream::open() {
  if (stopped_) {
    return;
  }
  client_.with_token(lifetime_.guard([this](const EtcdFailure* failure) {
    if (stopped_) {
      return;
    }
    if (failure != nullptr) {
      stopped_ = true;
      handlers_.on_failure(*failure);
      return;
    }
    open_with_token();
  }));
}

void WatchStream::open_with_token() {
  created_ = false;
  token_ = client_.token();
  connection_ = client_.stream_connection(member_);
  connection_->stream(
      "/v3/watch", EtcdCodec::watch_create(key_, range_end_, next_revision_), token_,
      Clock::now() + client_.options().op_timeout,
      lifetime_.guard([this](std::string_view line) { on_line(line); }),
      lifetime_.guard([this](HttpReply reply) {
        if (reply.failure == HttpFailure::kNone) {
          on_trouble(reply.status == kHttpUnavailable ? Trouble::kNoLeader : Trouble::kProtocol,
                     "watch answered " + reply.detail);
          return;
        }
        on_trouble(transport_trouble(reply.failure), reply.detail);
      }));
}

void WatchStream::on_line(std::string_view line) {
  if (stopped_) {
    return;
  }
  WatchMessage message;
  try {
    message =
        EtcdCodec::decode_watch(EtcdCodec::parse(line, client_.options().limits.max_json_depth));
  } catch (const EtcdProtocolError& error) {
    on_trouble(Trouble::kProtocol, std::string("bad watch message: ") + error.what());
    return;
  }
  if (message.error) {
    if (EtcdCodec::is_stale_token(ErrorReply{0, *message.error})) {
      client_.token_rejected(token_);
    }
    on_trouble(message.error_unavailable ? Trouble::kNoLeader : Trouble::kUnreachable,
               "watch ended: " + *message.error);
    return;
  }
  if (message.created) {
    created_ = true;
    failing_since_.reset();
    log_.reset();
    failed_attempts_ = 0;
    backoff_ = EtcdClient::kFirstBackoff;
    client_.member_served(member_);
  }
  if (message.canceled) {
    if (message.compact_revision > 0) {
      stopped_ = true;
      connection_->close();
      handlers_.on_compacted();
      return;
    }
    if (EtcdCodec::is_stale_token(ErrorReply{0, message.cancel_reason})) {
      // etcd checks a watch's token when it creates the watch: reopen with a fresh one.
      client_.token_rejected(token_);
    }
    on_trouble(Trouble::kNoLeader, "watch canceled: " + message.cancel_reason);
    return;
  }
  if (!created_) {
    on_trouble(Trouble::kProtocol, "watch events before the watch was created");
    return;
  }
  // After a reconnection, never hand over an event twice. One txn's events share a revision,
  // and etcd never splits a revision across messages.
  const std::int64_t first_new = next_revision_;
  std::vector<WatchEvent> fresh;
  for (auto& event : message.events) {
    if (event.kv.mod_revision >= first_new) {
      next_revision_ = std::max(next_revision_, event.kv.mod_revision + 1);
      fresh.push_back(std::move(event));
    }
  }
  if (!fresh.empty()) {
    handlers_.on_events(fresh);
  }
}

void WatchStream::on_trouble(Trouble trouble, const std::string& detail) {
  if (stopped_) {
    return;
  }
  if (connection_) {
    connection_->close();
    connection_.reset();
  }
  const auto now = Clock::now();
  if (!failing_since_) {
    failing_since_ = now;
    log_.emplace(client_.endpoints());
    failed_attempts_ = 0;
    backoff_ = EtcdClient::kFirstBackoff;
  }
  log_->record(member_, trouble, detail);
  client_.member_failed(member_);
  ++failed_attempts_;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since_);
  const auto budget = client_.options().failover_budget;
  if (!log_->any_usable() || waited >= budget) {
    stopped_ = true;
    handlers_.on_failure(log_->summary("watch", waited));
    return;
  }
  const std::size_t count = client_.endpoints().size();
  do {
    member_ = (member_ + 1) % count;
  } while (!log_->usable(member_));
  if (failed_attempts_ % count != 0) {
    open();
    return;
  }
  retry_timer_.expires_after(std::min<Clock::duration>(backoff_, budget - waited));
  backoff_ = std::min(backoff_ * 2, EtcdClient::kMaxBackoff);
  retry_timer_.async_wait(lifetime_.guard([this](const boost::system::error_code& ec) {
    if (!ec) {
      open();
    }
  }));
}

}  // namespace ddprun::rendezvous::backends::etcd
