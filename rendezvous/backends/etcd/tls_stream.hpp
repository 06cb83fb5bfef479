#pragma once
// TlsStream: an Asio async stream (what Beast reads and writes HTTP on) that runs a TlsSession
// over a beast::tcp_stream: ciphertext goes through the TCP stream's own reads and writes, so
// its expiry (expires_at) bounds TLS operations as it bounds plain ones.
//
// Errors: a TLS failure completes with TlsError::kFailed (error_text() says why); the peer
// closing TCP without a TLS close_notify with TlsError::kTruncated; a close_notify with eof.
// Threading: one io_context thread; one read and one write at most in flight, never both (the
// HTTP exchange alternates them).

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/tls_context.hpp"

namespace ddprun::rendezvous::backends::etcd {

enum class TlsError { kFailed = 1, kTruncated = 2 };
const boost::system::error_category& tls_category();
inline boost::system::error_code make_error_code(TlsError error) {
  return {static_cast<int>(error), tls_category()};
}

}  // namespace ddprun::rendezvous::backends::etcd

template <>
struct boost::system::is_error_code_enum<ddprun::rendezvous::backends::etcd::TlsError>
    : std::true_type {};

namespace ddprun::rendezvous::backends::etcd {

class TlsStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  TlsStream(boost::asio::io_context& io, const TlsContext& context, const std::string& host);
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() { return next_.get_executor(); }
  boost::beast::tcp_stream& next_layer() { return next_; }
  // Why the last operation failed with TlsError::kFailed.
  const std::string& error_text() const { return error_; }

  // Handler: void(error_code, std::size_t): the byte count is 0 for the handshake.
  template <typename Token>
  auto async_handshake(Token&& token) {
    return start(Kind::kHandshake, boost::asio::mutable_buffer(), std::forward<Token>(token));
  }
  template <typename Buffers, typename Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return start(Kind::kRead, first_nonempty<boost::asio::mutable_buffer>(buffers),
                 std::forward<Token>(token));
  }
  template <typename Buffers, typename Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    const auto buffer = first_nonempty<boost::asio::const_buffer>(buffers);
    // The session only reads from it.
    return start(Kind::kWrite,
                 boost::asio::mutable_buffer(const_cast<void*>(buffer.data()), buffer.size()),
                 std::forward<Token>(token));
  }

 private:
  enum class Kind { kHandshake, kRead, kWrite };
  class Pump;

  template <typename Buffer, typename Buffers>
  static Buffer first_nonempty(const Buffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const Buffer buffer(*it);
      if (buffer.size() > 0) {
        return buffer;
      }
    }
    return Buffer();
  }

  template <typename Token>
  auto start(Kind kind, boost::asio::mutable_buffer buffer, Token&& token);

  // One engine call for kind on buffer, after feeding it the buffered input (fed: some was).
  TlsSession::Result call(Kind kind, boost::asio::mutable_buffer buffer, bool& fed);
  // Moves pending ciphertext into output_; false when there is none.
  bool take_output();
  // Room at the end of input_ for the next TCP read.
  boost::asio::mutable_buffer input_space();
  void received(std::size_t bytes) { input_end_ += bytes; }
  bool input_buffered() const { return input_begin_ < input_end_; }
  boost::system::error_code failure(TlsError error, std::string text);

  boost::beast::tcp_stream next_;
  std::unique_ptr<TlsSession> session_;  // null when none could be made (error_ says why)
  std::vector<char> input_;              // ciphertext read, not yet taken by the session
  std::size_t input_begin_ = 0;
  std::size_t input_end_ = 0;
  std::vector<char> output_;  // ciphertext being written
  std::string error_;
};

// The composed operation behind handshake, read and write: call the engine; send what it
// produced; read what it wants; repeat until it is done. Never completes inside the initiating
// call (a result available at once is posted).
class TlsStream::Pump {
 public:
  Pump(TlsStream& stream, Kind kind, boost::asio::mutable_buffer buffer)
      : stream_(stream), kind_(kind), buffer_(buffer) {}

  template <typename Self>
  void operator()(Self& self, boost::system::error_code ec = {}, std::size_t bytes = 0) {
    switch (stage_) {
      case Stage::kStart:
        break;
      case Stage::kPosted:
        self.complete(ec_, result_.bytes);
        return;
      case Stage::kSent:
        if (ec) {
          return finish(self, ec);
        }
        return act(self);
      case Stage::kReceived:
        if (ec == boost::asio::error::eof) {
          return finish(self, stream_.failure(TlsError::kTruncated, "the peer closed TCP"));
        }
        if (ec) {
          return finish(self, ec);
        }
        stream_.received(bytes);
        break;
    }
    step(self);
  }

 private:
  enum class Stage { kStart, kSent, kReceived, kPosted };

  template <typename Self>
  void step(Self& self) {
    fed_ = false;
    result_ = stream_.call(kind_, buffer_, fed_);
    if (stream_.take_output()) {
      stage_ = Stage::kSent;
      boost::asio::async_write(stream_.next_, boost::asio::buffer(stream_.output_),
                               std::move(self));
      return;
    }
    if (result_.status == TlsSession::Status::kWantOutput) {
      // A BIO pair wants output only while some is pending: no progress is possible.
      return finish(self, stream_.failure(TlsError::kFailed, "the TLS engine stalled"));
    }
    act(self);
  }

  // Acts on the engine's last answer, once its output went out.
  template <typename Self>
  void act(Self& self) {
    switch (result_.status) {
      case TlsSession::Status::kDone:
        return finish(self, {});
      case TlsSession::Status::kWantInput:
        // More input may be buffered already (the session takes what fits).
        return fed_ && stream_.input_buffered() ? step(self) : receive(self);
      case TlsSession::Status::kWantOutput:
        return step(self);
      case TlsSession::Status::kClosed:
        return finish(self, boost::asio::error::eof);
      case TlsSession::Status::kFailed:
        break;
    }
    finish(self, stream_.failure(TlsError::kFailed, ""));
  }

  template <typename Self>
  void receive(Self& self) {
    stage_ = Stage::kReceived;
    stream_.next_.async_read_some(stream_.input_space(), std::move(self));
  }

  template <typename Self>
  void finish(Self& self, boost::system::error_code ec) {
    if (ec) {
      result_.bytes = 0;
    }
    if (stage_ == Stage::kStart) {
      stage_ = Stage::kPosted;
      ec_ = ec;
      boost::asio::post(stream_.get_executor(), std::move(self));
      return;
    }
    self.complete(ec, result_.bytes);
  }

  TlsStream& stream_;
  Kind kind_;
  boost::asio::mutable_buffer buffer_;
  Stage stage_ = Stage::kStart;
  TlsSession::Result result_;
  bool fed_ = false;              // the last call gave the session input
  boost::system::error_code ec_;  // kPosted: the result to deliver
};

template <typename Token>
auto TlsStream::start(Kind kind, boost::asio::mutable_buffer buffer, Token&& token) {
  return boost::asio::async_compose<Token, void(boost::system::error_code, std::size_t)>(
      Pump(*this, kind, buffer), token, next_);
}

}  // namespace ddprun::rendezvous::backends::etcd
