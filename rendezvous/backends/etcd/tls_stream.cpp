// TlsStream: the engine calls and the buffers between the session and TCP.

#include "rendezvous/backends/etcd/tls_stream.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

// Bytes read from TCP at a time: one TLS record and its header.
constexpr std::size_t kReadBytes = 17 * 1024;

// Boost's error_category has a protected non-virtual destructor by design (categories are
// static objects, never deleted through the base).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
class TlsCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ddprun.tls"; }
  std::string message(int value) const override {
    return static_cast<TlsError>(value) == TlsError::kTruncated
               ? "stream truncated (TCP closed without a TLS close_notify)"
               : "TLS failure";
  }
};
#pragma GCC diagnostic pop

}  // namespace

const boost::system::error_category& tls_category() {
  static const TlsCategory category;
  return category;
}

TlsStream::TlsStream(boost::asio::io_context& io, const TlsContext& context,
                     const std::string& host)
    : next_(io) {
  auto session = context.session(host);
  if (auto* made = std::get_if<std::unique_ptr<TlsSession>>(&session)) {
    session_ = std::move(*made);
  } else {
    error_ = "no TLS session for " + host + ": " + std::get<std::string>(session);
  }
}

TlsSession::Result TlsStream::call(Kind kind, boost::asio::mutable_buffer buffer, bool& fed) {
  if (!session_) {
    return {TlsSession::Status::kFailed, 0};
  }
  while (input_buffered()) {
    const std::size_t taken =
        session_->put_input(input_.data() + input_begin_, input_end_ - input_begin_);
    if (taken == 0) {
      break;
    }
    fed = true;
    input_begin_ += taken;
  }
  switch (kind) {
    case Kind::kHandshake:
      return session_->handshake();
    case Kind::kRead:
      return buffer.size() == 0 ? TlsSession::Result{TlsSession::Status::kDone, 0}
                                : session_->read(buffer.data(), buffer.size());
    case Kind::kWrite:
      return buffer.size() == 0 ? TlsSession::Result{TlsSession::Status::kDone, 0}
                                : session_->write(buffer.data(), buffer.size());
  }
  return {TlsSession::Status::kFailed, 0};
}

bool TlsStream::take_output() {
  const std::size_t pending = session_ ? session_->pending_output() : 0;
  output_.resize(pending);
  if (pending == 0) {
    return false;
  }
  output_.resize(session_->take_output(output_.data(), pending));
  return !output_.empty();
}

boost::asio::mutable_buffer TlsStream::input_space() {
  if (input_begin_ == input_end_) {
    input_begin_ = input_end_ = 0;
  }
  if (input_.size() < input_end_ + kReadBytes) {
    input_.resize(input_end_ + kReadBytes);
  }
  return boost::asio::buffer(input_.data() + input_end_, input_.size() - input_end_);
}

boost::system::error_code TlsStream::failure(TlsError error, std::string text) {
  if (text.empty()) {
    text = session_ ? session_->last_error() : error_;
  }
  error_ = std::move(text);
  return make_error_code(error);
}

}  // namespace ddprun::rendezvous::backends::etcd
