// HttpConnection: connect (resolve, TCP, TLS), write one POST, read its reply or its stream.

#include "rendezvous/backends/etcd/http_connection.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace ddprun::rendezvous::backends::etcd {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Bytes read from the socket at a time beyond a header; the read buffer never holds more
// than this plus one header, since the parser consumes what it can.
constexpr std::size_t kReadAheadBytes = 64 * 1024;
// TCP keep-alive, so a watch on a member whose host vanished (no RST) fails over within
// about kKeepAliveIdle + kKeepAliveCount * kKeepAliveInterval seconds.
constexpr int kKeepAliveIdleSeconds = 5;
constexpr int kKeepAliveIntervalSeconds = 2;
constexpr int kKeepAliveCount = 3;
// etcd's gateway fails a request at once when its member has no leader (instead of blocking
// for 7 s), and ends a watch when the member loses its leader.
constexpr std::string_view kRequireLeaderHeader = "Grpc-Metadata-hasleader";

bool is_closed_by_peer(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == TlsError::kTruncated;
}

bool is_parse_error(const boost::system::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_version).category();
}

HttpFailure failure_of(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout) {
    return HttpFailure::kTimeout;
  }
  if (is_closed_by_peer(ec)) {
    return HttpFailure::kBroken;
  }
  if (ec.category() == tls_category()) {
    // A TLS alert (with TLS 1.3, a refused client certificate arrives after the request).
    return HttpFailure::kTls;
  }
  return is_parse_error(ec) ? HttpFailure::kProtocol : HttpFailure::kBroken;
}

void tune_socket(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  socket.set_option(net::socket_base::keep_alive(true), ignored);
  const int fd = socket.native_handle();
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepAliveIdleSeconds, sizeof(int));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepAliveIntervalSeconds, sizeof(int));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepAliveCount, sizeof(int));
}

}  // namespace

std::shared_ptr<HttpConnection> HttpConnection::create(net::io_context& io, EtcdEndpoint endpoint,
                                                       std::shared_ptr<const TlsContext> tls,
                                                       const HttpLimits& limits) {
  return std::shared_ptr<HttpConnection>(
      new HttpConnection(io, std::move(endpoint), std::move(tls), limits));
}

HttpConnection::HttpConnection(net::io_context& io, EtcdEndpoint endpoint,
                               std::shared_ptr<const TlsContext> tls, const HttpLimits& limits)
    : io_(io),
      endpoint_(std::move(endpoint)),
      tls_(std::move(tls)),
      limits_(limits),
      resolver_(io),
      resolve_timer_(io),
      buffer_(limits.max_header_bytes + kReadAheadBytes) {
  if (tls_) {
    secure_.emplace(io, *tls_, endpoint_.host);
  } else {
    plain_.emplace(io);
  }
}

HttpConnection::~HttpConnection() = default;

template <typename Function>
void HttpConnection::with_stream(Function&& function) {
  if (secure_) {
    function(*secure_);
  } else {
    function(*plain_);
  }
}

beast::tcp_stream& HttpConnection::lowest_layer() {
  return secure_ ? secure_->next_layer() : *plain_;
}

void HttpConnection::exchange(std::string target, std::string body, std::string authorization,
                              Clock::time_point deadline, ReplyHandler done) {
  streaming_ = false;
  done_ = std::move(done);
  begin(std::move(target), std::move(body), std::move(authorization), deadline);
}

void HttpConnection::stream(std::string target, std::string body, std::string authorization,
                            Clock::time_point header_deadline, LineHandler on_line,
                            ReplyHandler on_end) {
  streaming_ = true;
  on_line_ = std::move(on_line);
  done_ = std::move(on_end);
  begin(std::move(target), std::move(body), std::move(authorization), header_deadline);
}

void HttpConnection::begin(std::string target, std::string body, std::string authorization,
                           Clock::time_point deadline) {
  busy_ = true;
  request_sent_ = false;
  deadline_ = deadline;
  request_ = {};
  request_.method(http::verb::post);
  request_.target(target);
  request_.version(11);
  request_.set(http::field::host, format_endpoint(endpoint_));
  request_.set(http::field::content_type, "application/json");
  request_.set(beast::string_view(kRequireLeaderHeader.data(), kRequireLeaderHeader.size()),
               "true");
  if (!authorization.empty()) {
    request_.set(http::field::authorization, authorization);
  }
  request_.keep_alive(true);
  request_.body() = std::move(body);
  request_.prepare_payload();
  const bool broken = used_ && !connected_;
  used_ = true;
  if (closed_ || broken) {
    net::post(io_, [self = shared_from_this()] {
      self->fail(HttpFailure::kBroken, "the connection was closed");
    });
  } else if (connected_) {
    write();
  } else {
    resolve();
  }
}

void HttpConnection::resolve() {
  boost::system::error_code not_an_address;
  const auto address = net::ip::make_address(endpoint_.host, not_an_address);
  if (!not_an_address) {
    lowest_layer().expires_at(deadline_);
    lowest_layer().async_connect(
        tcp::endpoint(address, endpoint_.port),
        [self = shared_from_this()](const boost::system::error_code& ec) {
          if (ec) {
            self->fail(ec == beast::error::timeout ? HttpFailure::kTimeout : HttpFailure::kConnect,
                       "connect", ec);
            return;
          }
          self->handshake();
        });
    return;
  }
  resolve_timer_.expires_at(deadline_);
  resolve_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) {
      self->resolver_.cancel();
    }
  });
  resolver_.async_resolve(endpoint_.host, std::to_string(endpoint_.port),
                          [self = shared_from_this()](const boost::system::error_code& ec,
                                                      const tcp::resolver::results_type& results) {
                            self->resolve_timer_.cancel();
                            if (ec) {
                              self->fail(HttpFailure::kConnect, "resolve " + self->endpoint_.host,
                                         ec);
                              return;
                            }
                            self->connect(results);
                          });
}

void HttpConnection::connect(const tcp::resolver::results_type& results) {
  lowest_layer().expires_at(deadline_);
  lowest_layer().async_connect(
      results,
      [self = shared_from_this()](const boost::system::error_code& ec, const tcp::endpoint&) {
        if (ec) {
          self->fail(ec == beast::error::timeout ? HttpFailure::kTimeout : HttpFailure::kConnect,
                     "connect", ec);
          return;
        }
        self->handshake();
      });
}

void HttpConnection::handshake() {
  if (closed_) {
    return;
  }
  tune_socket(lowest_layer().socket());
  if (!secure_) {
    connected_ = true;
    write();
    return;
  }
  // The session checks the member's certificate against its host name (sent as SNI) or address.
  lowest_layer().expires_at(deadline_);
  secure_->async_handshake(
      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
        if (ec) {
          self->fail(ec == beast::error::timeout ? HttpFailure::kTimeout : HttpFailure::kTls,
                     "TLS handshake", ec);
          return;
        }
        self->connected_ = true;
        self->write();
      });
}

void HttpConnection::write() {
  if (closed_) {
    return;
  }
  request_sent_ = true;
  lowest_layer().expires_at(deadline_);
  with_stream([this](auto& stream) {
    http::async_write(
        stream, request_,
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
          if (ec) {
            self->fail(ec == beast::error::timeout ? HttpFailure::kTimeout : HttpFailure::kBroken,
                       "send", ec);
            return;
          }
          if (self->streaming_) {
            self->read_stream_header();
          } else {
            self->read_reply();
          }
        });
  });
}

void HttpConnection::read_reply() {
  if (closed_) {
    return;
  }
  parser_.emplace();
  parser_->header_limit(limits_.max_header_bytes);
  parser_->body_limit(limits_.max_body_bytes);
  // The header first: Boost 1.74's eager parser reserves a Content-Length body before it
  // honours body_limit, so a huge announced length is refused here, before any allocation.
  read_header(*parser_, "reply", [](HttpConnection& self) {
    const auto length = self.parser_->content_length();
    if (length && *length > self.limits_.max_body_bytes) {
      self.fail(HttpFailure::kProtocol, "reply body of " + std::to_string(*length) +
                                            " bytes is over the limit of " +
                                            std::to_string(self.limits_.max_body_bytes));
      return;
    }
    self.read_reply_body();
  });
}

template <typename Parser, typename Then>
void HttpConnection::read_header(Parser& parser, const char* what, Then then) {
  lowest_layer().expires_at(deadline_);
  with_stream([&](auto& stream) {
    http::async_read_header(
        stream, buffer_, parser,
        [self = shared_from_this(), what, then](const boost::system::error_code& ec, std::size_t) {
          if (ec) {
            self->fail(failure_of(ec), what, ec);
            return;
          }
          then(*self);
        });
  });
}

void HttpConnection::read_reply_body() {
  if (closed_) {
    return;
  }
  with_stream([this](auto& stream) {
    http::async_read(stream, buffer_, *parser_,
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                       if (ec) {
                         self->fail(failure_of(ec), "reply", ec);
                         return;
                       }
                       auto& message = self->parser_->get();
                       HttpReply reply;
                       reply.request_sent = true;
                       reply.status = message.result_int();
                       reply.body = std::move(message.body());
                       const bool keep = message.keep_alive();
                       self->parser_.reset();
                       self->busy_ = false;
                       if (!keep) {
                         self->shut_socket();
                       }
                       self->finish(std::move(reply));
                     });
  });
}

void HttpConnection::read_stream_header() {
  if (closed_) {
    return;
  }
  stream_parser_.emplace();
  stream_parser_->header_limit(limits_.max_header_bytes);
  // The stream is endless: its total is not bounded, each line is (on_chunk_bytes).
  stream_parser_->body_limit(boost::none);
  chunk_callback_ = [this](std::uint64_t, beast::string_view bytes,
                           boost::system::error_code& ec) -> std::size_t {
    on_chunk_bytes(std::string_view(bytes.data(), bytes.size()), ec);
    return bytes.size();
  };
  stream_parser_->on_chunk_body(chunk_callback_);
  read_header(*stream_parser_, "stream header", [](HttpConnection& self) {
    const auto& header = self.stream_parser_->get();
    if (header.result_int() != 200) {
      HttpReply reply;
      reply.request_sent = true;
      reply.status = header.result_int();
      reply.detail = "HTTP status " + std::to_string(reply.status);
      self.shut_socket();
      self.finish(std::move(reply));
      return;
    }
    if (!self.stream_parser_->chunked()) {
      self.fail(HttpFailure::kProtocol, "the reply to a watch is not a chunked stream");
      return;
    }
    self.lowest_layer().expires_never();
    self.read_stream_body();
  });
}

void HttpConnection::on_chunk_bytes(std::string_view bytes, boost::system::error_code& ec) {
  std::size_t start = 0;
  while (true) {
    const auto newline = bytes.find('\n', start);
    if (newline == std::string_view::npos) {
      break;
    }
    partial_line_.append(bytes.substr(start, newline - start));
    lines_.push_back(std::move(partial_line_));
    partial_line_.clear();
    start = newline + 1;
  }
  partial_line_.append(bytes.substr(start));
  if (partial_line_.size() > limits_.max_stream_line_bytes) {
    ec = http::error::body_limit;
    return;
  }
  if (!lines_.empty()) {
    // Return from the read so the lines are handed over outside the parser.
    ec = http::error::end_of_chunk;
  }
}

void HttpConnection::read_stream_body() {
  if (closed_) {
    return;
  }
  with_stream([this](auto& stream) {
    http::async_read(
        stream, buffer_, *stream_parser_,
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
          if (self->closed_) {
            return;
          }
          if (ec && ec != http::error::end_of_chunk) {
            if (ec == http::error::body_limit) {
              self->fail(HttpFailure::kProtocol,
                         "a watch message is larger than " +
                             std::to_string(self->limits_.max_stream_line_bytes) + " bytes");
            } else {
              self->fail(is_parse_error(ec) && !is_closed_by_peer(ec) ? HttpFailure::kProtocol
                                                                      : HttpFailure::kBroken,
                         "watch stream", ec);
            }
            return;
          }
          auto lines = std::move(self->lines_);
          self->lines_.clear();
          for (const auto& line : lines) {
            if (self->closed_) {
              return;
            }
            if (self->on_line_) {
              self->on_line_(line);
            }
          }
          if (self->closed_) {
            return;
          }
          if (!ec) {
            self->fail(HttpFailure::kBroken, "the member ended the watch stream");
            return;
          }
          self->read_stream_body();
        });
  });
}

void HttpConnection::fail(HttpFailure failure, const std::string& what,
                          const boost::system::error_code& ec) {
  std::string why = ec == beast::error::timeout ? "timed out" : ec.message();
  if (ec == TlsError::kFailed && secure_) {
    why = "TLS: " + secure_->error_text();
  }
  fail(failure, what + ": " + why);
}

void HttpConnection::fail(HttpFailure failure, const std::string& detail) {
  if (closed_) {
    return;
  }
  HttpReply reply;
  reply.failure = failure;
  reply.request_sent = request_sent_;
  reply.detail = detail;
  shut_socket();
  finish(std::move(reply));
}

void HttpConnection::finish(HttpReply reply) {
  busy_ = false;
  auto done = std::move(done_);
  done_ = nullptr;
  if (streaming_) {
    on_line_ = nullptr;
  }
  if (done && !closed_) {
    done(std::move(reply));
  }
}

void HttpConnection::shut_socket() {
  connected_ = false;
  boost::system::error_code ignored;
  resolver_.cancel();
  resolve_timer_.cancel();
  lowest_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
  lowest_layer().close();
}

void HttpConnection::close() {
  if (closed_) {
    return;
  }
  shut_socket();
  closed_ = true;
  done_ = nullptr;
  on_line_ = nullptr;
}

}  // namespace ddprun::rendezvous::backends::etcd
