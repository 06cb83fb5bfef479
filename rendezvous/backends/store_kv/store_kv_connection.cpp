#include "rendezvous/backends/store_kv/store_kv_connection.hpp"

#include <stdexcept>
#include <utility>

#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/wire_codec.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::backends {
namespace {

using round::KvErrorKind;

// Bytes asked of the socket per read; replies are small except MULTI_GET's.
constexpr std::size_t kReadChunkBytes = 64 * 1024;
constexpr std::size_t kIntegerBytes = 8;
constexpr std::size_t kEchoBytes = 4;

std::string milliseconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

}  // namespace

StoreKvConnection::StoreKvConnection(boost::asio::io_context& io, Limits limits)
    : io_(io),
      limits_(limits),
      socket_(io),
      connect_timer_(io),
      reply_timer_(io),
      // Not zero-filled: only the bytes a read brings in become resident (the agent keeps a
      // few connections; zeroing their buffers cost 0.2 MiB of its peak RSS).
      read_chunk_(std::make_unique_for_overwrite<char[]>(kReadChunkBytes)) {}

StoreKvConnection::~StoreKvConnection() {
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void StoreKvConnection::connect(const std::vector<boost::asio::ip::tcp::endpoint>& endpoints,
                                Clock::time_point deadline,
                                std::function<void(std::optional<Failure>)> done) {
  auto timed_out = std::make_shared<bool>(false);
  connect_timer_.expires_at(deadline);
  connect_timer_.async_wait(
      [self = shared_from_this(), timed_out](const boost::system::error_code& error) {
        if (error || self->connected_ || self->closed_) {
          return;  // cancelled: the connect finished first
        }
        *timed_out = true;
        boost::system::error_code ignored;
        self->socket_.close(ignored);  // the connect's handler then runs with an error
      });
  boost::asio::async_connect(
      socket_, endpoints,
      [self = shared_from_this(), timed_out, done = std::move(done)](
          const boost::system::error_code& error, const boost::asio::ip::tcp::endpoint&) {
        if (self->abandoned_) {
          return;
        }
        self->connect_timer_.cancel();
        if (error || self->closed_) {
          self->shut_socket();
          done(Failure{KvErrorKind::kUnreachable,
                       *timed_out ? std::string("connect timed out") : error.message()});
          return;
        }
        boost::system::error_code local_error;
        boost::system::error_code remote_error;
        const auto local = self->socket_.local_endpoint(local_error);
        const auto remote = self->socket_.remote_endpoint(remote_error);
        if (!local_error && !remote_error && local == remote) {
          // Linux pairs a connect to an unused local port with itself (simultaneous open);
          // the socket would then hold the very port the store is about to bind.
          self->shut_socket();
          done(Failure{KvErrorKind::kUnreachable,
                       "connected to itself (nothing listens on that port yet)"});
          return;
        }
        boost::system::error_code ignored;
        self->socket_.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
        self->connected_ = true;
        self->arm_read();
        done(std::nullopt);
      });
}

void StoreKvConnection::send(std::string bytes, ReplyShape shape, std::string what,
                             ReplyHandler handler, std::size_t count) {
  if (closed_) {
    // The owner learnt of the failure already; answer anyway, never inside this call.
    boost::asio::post(io_, [self = shared_from_this(), handler = std::move(handler)] {
      if (!self->abandoned_) {
        Outcome outcome = Failure{KvErrorKind::kUnreachable, "the connection is closed"};
        handler(outcome);
      }
    });
    return;
  }
  Entry entry;
  entry.shape = shape;
  entry.count = count;
  entry.what = std::move(what);
  entry.handler = std::move(handler);
  if (shape != ReplyShape::wait) {
    entry.deadline = Clock::now() + limits_.op_timeout;
  }
  entries_.push_back(std::move(entry));
  pending_output_ += bytes;
  arm_reply_timer();
  schedule_flush();
}

void StoreKvConnection::cancel_wait(std::string request, ReplyHandler handler) {
  if (closed_) {
    return;
  }
  if (entries_.size() != 1 || entries_.front().shape != ReplyShape::wait ||
      entries_.front().cancelled_wait) {
    throw std::logic_error("cancel_wait: no single WAIT outstanding on the connection");
  }
  Entry& entry = entries_.front();
  entry.cancelled_wait = true;
  entry.handler = std::move(handler);
  entry.what = "CANCEL_WAIT";
  entry.deadline = Clock::now() + limits_.op_timeout;
  pending_output_ += request;
  arm_reply_timer();
  schedule_flush();
}

void StoreKvConnection::close() {
  abandoned_ = true;
  on_failure_ = nullptr;
  entries_.clear();
  shut_socket();
}

void StoreKvConnection::shut_socket() {
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
  connect_timer_.cancel();
  reply_timer_.cancel();
}

void StoreKvConnection::fail(KvErrorKind kind, const std::string& reason) {
  if (closed_) {
    return;
  }
  const auto keep_alive = shared_from_this();
  shut_socket();
  auto entries = std::move(entries_);
  entries_.clear();
  const Failure failure{kind, reason};
  if (auto notify = std::move(on_failure_); notify && !abandoned_) {
    notify(failure);
  }
  for (auto& entry : entries) {
    if (abandoned_) {
      return;
    }
    Outcome outcome = failure;
    entry.handler(outcome);
  }
}

void StoreKvConnection::schedule_flush() {
  if (write_in_flight_ || flush_posted_) {
    return;
  }
  // Post, so that every request queued in this turn of the loop leaves in one write.
  flush_posted_ = true;
  boost::asio::post(io_, [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->flush();
  });
}

void StoreKvConnection::flush() {
  if (closed_ || write_in_flight_ || pending_output_.empty()) {
    return;
  }
  if (!fence_.empty() && !entries_.empty() && entries_.back().shape == ReplyShape::none) {
    // Without a later reply nobody learns that the batch's last requests were applied.
    Entry fence;
    fence.shape = ReplyShape::check;
    fence.what = "CHECK (confirming the requests before it)";
    fence.handler = [](Outcome&) {};
    fence.deadline = Clock::now() + limits_.op_timeout;
    entries_.push_back(std::move(fence));
    pending_output_ += fence_;
  }
  writing_.swap(pending_output_);  // writing_ was empty: pending_output_ is now
  write_in_flight_ = true;
  boost::asio::async_write(socket_, boost::asio::buffer(writing_),
                           [self = shared_from_this()](const boost::system::error_code& error,
                                                       std::size_t) { self->on_written(error); });
}

void StoreKvConnection::on_written(const boost::system::error_code& error) {
  write_in_flight_ = false;
  writing_.clear();
  if (closed_) {
    return;
  }
  if (error) {
    fail(KvErrorKind::kUnreachable, "send failed: " + error.message());
    return;
  }
  flush();
}

void StoreKvConnection::arm_read() {
  socket_.async_read_some(
      boost::asio::buffer(read_chunk_.get(), kReadChunkBytes),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t received) {
        if (self->closed_) {
          return;
        }
        if (error == boost::asio::error::eof) {
          self->fail(KvErrorKind::kUnreachable,
                     "the server closed the connection" + self->first_reply_hint_);
          return;
        }
        if (error) {
          self->fail(KvErrorKind::kUnreachable, "receive failed: " + error.message());
          return;
        }
        self->on_read(received);
      });
}

void StoreKvConnection::on_read(std::size_t received) {
  input_.append(read_chunk_.get(), received);
  parse_replies();
  if (closed_) {
    return;
  }
  input_.erase(0, consumed_);
  consumed_ = 0;
  arm_read();
}

void StoreKvConnection::parse_replies() {
  while (!closed_) {
    std::size_t answered = 0;  // the first request that expects bytes
    while (answered < entries_.size() && entries_[answered].shape == ReplyShape::none) {
      ++answered;
    }
    if (answered == entries_.size()) {
      if (available() > 0) {
        fail(KvErrorKind::kProtocol,
             std::to_string(available()) + " bytes arrived that answer no request");
      }
      return;
    }
    Reply reply;
    std::string violation;
    const Parse status = parse(entries_[answered], reply, violation);
    if (status == Parse::need_more) {
      return;
    }
    if (status == Parse::violation) {
      fail(KvErrorKind::kProtocol, violation + " (answering " + entries_[answered].what + ")");
      return;
    }
    first_reply_hint_.clear();
    // Replies come in order: the server applied every request before the one it answered.
    for (std::size_t i = 0; i <= answered; ++i) {
      Entry entry = std::move(entries_.front());
      entries_.pop_front();
      Outcome outcome = i == answered ? Outcome(std::move(reply)) : Outcome(Reply{});
      entry.handler(outcome);
      if (abandoned_ || closed_) {
        return;  // the handler closed or aborted the connection: the rest heard of it
      }
    }
  }
}

StoreKvConnection::Parse StoreKvConnection::parse(Entry& entry, Reply& reply,
                                                  std::string& violation) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(input_.data() + consumed_);
  const std::size_t size = available();
  switch (entry.shape) {
    case ReplyShape::none:
      return Parse::complete;
    case ReplyShape::check:
      if (size < 1) {
        return Parse::need_more;
      }
      if (bytes[0] != store::kCheckReady && bytes[0] != store::kCheckNotReady) {
        violation = "a status byte of " + std::to_string(bytes[0]) + " (not READY or NOT_READY)";
        return Parse::violation;
      }
      reply.ready = bytes[0] == store::kCheckReady;
      consumed_ += 1;
      return Parse::complete;
    case ReplyShape::wait:
      return parse_wait(entry, reply, violation);
    case ReplyShape::integer:
      if (size < kIntegerBytes) {
        return Parse::need_more;
      }
      reply.integer = static_cast<int64_t>(wire::load_u64(bytes));
      consumed_ += kIntegerBytes;
      return Parse::complete;
    case ReplyShape::echo:
      if (size < kEchoBytes) {
        return Parse::need_more;
      }
      reply.echo = wire::load_u32(bytes);
      consumed_ += kEchoBytes;
      return Parse::complete;
    case ReplyShape::auth_challenge:
    case ReplyShape::auth_verdict:
      return parse_auth(entry.shape, reply, violation);
    case ReplyShape::value: {
      Parse status = Parse::complete;
      parse_value(entry, reply.value, violation, status);
      return status;
    }
    case ReplyShape::values:
      while (entry.values.size() < entry.count) {
        std::string value;
        Parse status = Parse::complete;
        if (!parse_value(entry, value, violation, status)) {
          return status;
        }
        entry.values.push_back(std::move(value));
      }
      reply.values = std::move(entry.values);
      return Parse::complete;
  }
  violation = "a reply of an unknown shape";
  return Parse::violation;
}

// WAIT's reply; after CANCEL_WAIT also the cancellation's.
StoreKvConnection::Parse StoreKvConnection::parse_wait(const Entry& entry, Reply& reply,
                                                       std::string& violation) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(input_.data() + consumed_);
  const std::size_t size = available();
  if (size < 1) {
    return Parse::need_more;
  }
  // After CANCEL_WAIT: WAIT_CANCELED alone, or STOP_WAITING (the wait finished first)
  // followed by WAIT_CANCELED.
  const bool cancelled = entry.cancelled_wait;
  if (cancelled && bytes[0] == store::kWaitCanceled) {
    reply.ready = false;
    consumed_ += 1;
    return Parse::complete;
  }
  if (bytes[0] != store::kStopWaiting) {
    violation = "a status byte of " + std::to_string(bytes[0]) +
                (cancelled ? " after CANCEL_WAIT" : " (not STOP_WAITING)");
    return Parse::violation;
  }
  const std::size_t reply_bytes = cancelled ? 2 : 1;
  if (size < reply_bytes) {
    return Parse::need_more;
  }
  if (cancelled && bytes[1] != store::kWaitCanceled) {
    violation = "a status byte of " + std::to_string(bytes[1]) + " (not WAIT_CANCELED)";
    return Parse::violation;
  }
  reply.ready = true;
  consumed_ += reply_bytes;
  return Parse::complete;
}

// The job secret's replies: AUTH_HELLO's challenge (or "none needed") and AUTH_PROOF's verdict.
StoreKvConnection::Parse StoreKvConnection::parse_auth(ReplyShape shape, Reply& reply,
                                                       std::string& violation) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(input_.data() + consumed_);
  const std::size_t size = available();
  if (shape == ReplyShape::auth_challenge) {
    if (size < 1) {
      return Parse::need_more;
    }
    if (bytes[0] == store::kAuthNotRequired) {
      reply.ready = false;
      consumed_ += 1;
      return Parse::complete;
    }
    if (bytes[0] != store::kAuthChallenge) {
      violation = "an AUTH_HELLO status byte of " + std::to_string(bytes[0]);
      return Parse::violation;
    }
    if (size < store::kAuthChallengeBytes) {
      return Parse::need_more;
    }
    reply.ready = true;  // the store's nonce and proof follow
    reply.value.assign(reinterpret_cast<const char*>(bytes) + 1, store::kAuthChallengeBytes - 1);
    consumed_ += store::kAuthChallengeBytes;
    return Parse::complete;
  }
  if (size < 1) {
    return Parse::need_more;
  }
  if (bytes[0] != store::kAuthAccepted && bytes[0] != store::kAuthRefused) {
    violation = "an AUTH_PROOF status byte of " + std::to_string(bytes[0]);
    return Parse::violation;
  }
  reply.ready = bytes[0] == store::kAuthAccepted;
  consumed_ += 1;
  return Parse::complete;
}

bool StoreKvConnection::parse_value(Entry& entry, std::string& value, std::string& violation,
                                    Parse& status) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(input_.data() + consumed_);
  const std::size_t size = available();
  if (size < store::kLengthFieldBytes) {
    status = Parse::need_more;
    return false;
  }
  // Checked before anything is allocated or awaited: the length is untrusted.
  const uint64_t length = wire::load_u64(bytes);
  const std::size_t room = limits_.max_reply_bytes - entry.reply_bytes;
  if (length > room) {
    violation = "a reply length of " + std::to_string(length) + " bytes (the limit is " +
                std::to_string(limits_.max_reply_bytes) + ")";
    status = Parse::violation;
    return false;
  }
  if (size - store::kLengthFieldBytes < length) {
    status = Parse::need_more;
    return false;
  }
  value.assign(input_.data() + consumed_ + store::kLengthFieldBytes,
               static_cast<std::size_t>(length));
  consumed_ += store::kLengthFieldBytes + static_cast<std::size_t>(length);
  entry.reply_bytes += static_cast<std::size_t>(length);
  status = Parse::complete;
  return true;
}

void StoreKvConnection::arm_reply_timer() {
  if (reply_timer_armed_ || closed_) {
    return;
  }
  for (const auto& entry : entries_) {
    if (entry.deadline) {
      reply_timer_armed_ = true;
      reply_timer_.expires_at(*entry.deadline);
      reply_timer_.async_wait([self = shared_from_this()](const boost::system::error_code&) {
        self->reply_timer_armed_ = false;
        self->on_reply_timer();
      });
      return;
    }
  }
}

void StoreKvConnection::on_reply_timer() {
  if (closed_) {
    return;
  }
  // Deadlines grow along the queue (a cancelled WAIT aside), so the first one is the earliest;
  // the timer is moved lazily rather than on every reply.
  for (const auto& entry : entries_) {
    if (entry.deadline) {
      if (*entry.deadline <= Clock::now()) {
        fail(KvErrorKind::kUnresponsive,
             "no answer to " + entry.what + " within " + milliseconds_text(limits_.op_timeout));
        return;
      }
      break;
    }
  }
  arm_reply_timer();
}

}  // namespace ddprun::rendezvous::backends
