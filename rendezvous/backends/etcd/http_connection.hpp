#pragma once
// One HTTP/1.1 connection (plain TCP or TLS) to one etcd member: POST exchanges with a
// deadline, kept alive for the next exchange, or one streaming exchange (a watch) whose
// chunked reply is handed over line by line.
//
// Threading: one io_context thread. Asio handlers hold the connection (shared_from_this), so
// buffers outlive every pending operation; close() drops the callbacks, so after it nothing
// the owner gave us runs. Callbacks never run inside exchange() or stream().
// Error policy: every reply is untrusted: header and body sizes are bounded (HttpLimits); a
// malformed or oversized reply is a kProtocol failure and the connection is dropped. Any
// failure closes the connection.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/backends/etcd/http_limits.hpp"
#include "rendezvous/backends/etcd/tls_context.hpp"
#include "rendezvous/backends/etcd/tls_stream.hpp"

namespace ddprun::rendezvous::backends::etcd {

enum class HttpFailure {
  kNone,
  kConnect,   // name resolution or TCP connect failed (refused, unreachable, timed out)
  kTls,       // TLS failed: handshake, certificate, or an alert (the request was refused)
  kBroken,    // the connection broke after it was made (reset, closed, stream ended)
  kTimeout,   // no complete answer before the deadline
  kProtocol,  // the reply was not well-formed HTTP or broke a limit
};

struct HttpReply {
  HttpFailure failure = HttpFailure::kNone;
  // Bytes of the request may have reached the member, so it may have acted on it.
  bool request_sent = false;
  unsigned status = 0;  // HTTP status, when a status line arrived
  std::string body;     // unary replies only
  std::string detail;   // what went wrong, for messages
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  using Clock = std::chrono::steady_clock;
  using ReplyHandler = std::function<void(HttpReply)>;
  using LineHandler = std::function<void(std::string_view line)>;

  // tls: null for plain http.
  static std::shared_ptr<HttpConnection> create(boost::asio::io_context& io, EtcdEndpoint endpoint,
                                                std::shared_ptr<const TlsContext> tls,
                                                const HttpLimits& limits);
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  ~HttpConnection();

  // POSTs body to target (connecting first if needed) and reads the whole reply, all before
  // deadline. One exchange at a time. authorization: etcd's auth token for the Authorization
  // header; empty: none.
  void exchange(std::string target, std::string body, std::string authorization,
                Clock::time_point deadline, ReplyHandler done);

  // POSTs body to target and reads a chunked reply of newline-separated messages: the status
  // line and header must arrive before header_deadline; then each complete line goes to
  // on_line, with no deadline, until the stream ends or fails (on_end, which always reports a
  // failure: a stream is not meant to end) or close() is called. A non-200 status ends it at
  // once with failure kNone and that status.
  void stream(std::string target, std::string body, std::string authorization,
              Clock::time_point header_deadline, LineHandler on_line, ReplyHandler on_end);

  // Connected, no exchange in flight, and both sides keep the connection alive.
  bool reusable() const { return connected_ && !busy_ && !closed_; }
  // Closes the socket; callbacks given to this connection never run again.
  void close();
  const EtcdEndpoint& endpoint() const { return endpoint_; }

 private:
  using PlainStream = boost::beast::tcp_stream;
  using SecureStream = TlsStream;

  HttpConnection(boost::asio::io_context& io, EtcdEndpoint endpoint,
                 std::shared_ptr<const TlsContext> tls, const HttpLimits& limits);

  template <typename Function>
  void with_stream(Function&& function);
  boost::beast::tcp_stream& lowest_layer();

  void begin(std::string target, std::string body, std::string authorization,
             Clock::time_point deadline);
  void resolve();
  void connect(const boost::asio::ip::tcp::resolver::results_type& results);
  void handshake();
  void write();
  void read_reply();
  void read_reply_body();
  // Reads a reply's header into parser under the deadline; then(*this) unless it failed.
  template <typename Parser, typename Then>
  void read_header(Parser& parser, const char* what, Then then);
  void read_stream_header();
  void read_stream_body();
  void on_chunk_bytes(std::string_view bytes, boost::system::error_code& ec);
  void fail(HttpFailure failure, const std::string& what, const boost::system::error_code& ec);
  void fail(HttpFailure failure, const std::string& detail);
  void finish(HttpReply reply);
  void shut_socket();

  boost::asio::io_context& io_;
  EtcdEndpoint endpoint_;
  std::shared_ptr<const TlsContext> tls_;
  HttpLimits limits_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer resolve_timer_;
  std::optional<PlainStream> plain_;
  std::optional<SecureStream> secure_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::request<boost::beast::http::string_body> request_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::empty_body>> stream_parser_;
  Clock::time_point deadline_;
  bool streaming_ = false;
  bool connected_ = false;
  bool used_ = false;  // a connection is made once; after it broke, it is never reused
  bool busy_ = false;
  bool closed_ = false;
  bool request_sent_ = false;
  std::string partial_line_;
  std::vector<std::string> lines_;
  std::function<std::size_t(std::uint64_t, boost::beast::string_view, boost::system::error_code&)>
      chunk_callback_;  // the stream parser keeps a reference to it
  ReplyHandler done_;
  LineHandler on_line_;
};

}  // namespace ddprun::rendezvous::backends::etcd
