#include "agent/health/health_server.hpp"

#include <array>
#include <stdexcept>

#include "agent/health/health_http.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

}  // namespace

struct HealthServer::Loop {
  Loop(const HealthBoard& health_board, common::Seconds stale)
      : board(health_board), stale_after(stale) {}

  // The response to a GET: 200 while the agent's loop progresses, 503 once it has stalled.
  std::string report() {
    const bool alive =
        HealthBoard::Clock::now() - board.last_progress() <= common::steady(stale_after);
    last_state = board.state_or(last_state);
    return http_response(
        alive ? 200 : 503,
        health_body(last_state, alive, board.last_progress_unix_s(), stale_after.count()));
  }

  void accept_next();

  const HealthBoard& board;
  const common::Seconds stale_after;
  HealthState last_state;  // what the board said last; used while the loop holds its lock
  std::size_t open_connections = 0;
  // After what the connections touch when they go: destroying io destroys them.
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
};

namespace {

// One request: read its head (bounded in size and time), answer, let the client finish
// sending (so closing does not reset the answer away), close.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::size_t& open_connections)
      : socket_(std::move(socket)), deadline_(socket_.get_executor()), open_(open_connections) {
    ++open_;
  }
  ~Connection() { --open_; }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  template <class Answer>
  void start(Answer answer) {
    deadline_.expires_after(HealthServer::kReadLimit);
    deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error)
        return;
      if (self->answered_) {
        self->close();
      } else {
        self->answered_ = true;
        self->socket_.cancel();
        self->respond(http_response(408, "request not complete in time\n", "text/plain"));
      }
    });
    read_head(answer);
  }

 private:
  template <class Answer>
  void read_head(Answer answer) {
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this(), answer](
                                                      const boost::system::error_code& error,
                                                      std::size_t bytes) {
      if (self->answered_)
        return;
      if (error) {
        self->answered_ = true;
        self->close();
        return;
      }
      self->head_.append(self->chunk_.data(), bytes);
      const bool complete = end_of_head(self->head_) != std::string::npos;
      if (!complete && self->head_.size() < HealthServer::kMaxHeadBytes) {
        self->read_head(answer);
        return;
      }
      self->answered_ = true;
      switch (classify_request(self->head_)) {
        case HealthRequest::kGet:
          self->respond(complete ? answer()
                                 : http_response(431, "request head too large\n", "text/plain"));
          return;
        case HealthRequest::kOtherVerb:
          self->respond(http_response(405, "only GET is served here\n", "text/plain"));
          return;
        case HealthRequest::kMalformed:
          self->respond(http_response(400, "not an HTTP request\n", "text/plain"));
          return;
      }
    });
  }

  void respond(std::string response) {
    response_ = std::move(response);
    head_.clear();
    head_.shrink_to_fit();
    asio::async_write(
        socket_, asio::buffer(response_),
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t /*bytes*/) {
          if (error) {
            self->close();
            return;
          }
          boost::system::error_code ignored;
          self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
          self->deadline_.expires_after(HealthServer::kReadLimit);
          self->deadline_.async_wait([self](const boost::system::error_code& timer_error) {
            if (!timer_error)
              self->close();
          });
          self->drain();
        });
  }

  // Reads what the client still sends until it closes its side (or the deadline closes ours).
  void drain() {
    socket_.async_read_some(
        asio::buffer(chunk_),
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t /*bytes*/) {
          if (error) {
            self->close();
            return;
          }
          self->drain();
        });
  }

  void close() {
    boost::system::error_code ignored;
    deadline_.cancel();
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer deadline_;
  std::size_t& open_;
  std::array<char, 4096> chunk_{};
  std::string head_;
  std::string response_;
  bool answered_ = false;
};

}  // namespace

void HealthServer::Loop::accept_next() {
  acceptor.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
    if (error == asio::error::operation_aborted || !acceptor.is_open())
      return;
    if (!error && open_connections < kMaxConnections) {
      std::make_shared<Connection>(std::move(socket), open_connections)->start([this] {
        return report();
      });
    }
    // Over the limit the socket goes out of scope here: closed unanswered.
    if (!error) {
      accept_next();
      return;
    }
    // Out of descriptors, say: try again later rather than spin on the error.
    accept_retry.expires_after(kAcceptRetryDelay);
    accept_retry.async_wait([this](const boost::system::error_code& timer_error) {
      if (!timer_error)
        accept_next();
    });
  });
}

HealthServer::HealthServer(const std::string& host, uint16_t port, common::Seconds stale_after,
                           const HealthBoard& board)
    : loop_(std::make_unique<Loop>(board, stale_after)) {
  const std::string where = host + ":" + std::to_string(port);
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  const tcp::endpoint endpoint(address, port);
  if (!error)
    loop_->acceptor.open(endpoint.protocol(), error);
  if (!error)
    loop_->acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error)
    loop_->acceptor.bind(endpoint, error);
  if (!error)
    loop_->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error)
    throw std::runtime_error("health check: cannot listen on " + where + ": " + error.message());
  loop_->accept_next();
  thread_ = std::thread([loop = loop_.get()] { loop->io.run(); });
}

HealthServer::~HealthServer() {
  loop_->io.stop();  // thread-safe; the thread's handlers never block, so it returns promptly
  thread_.join();
}

uint16_t HealthServer::port() const {
  return loop_->acceptor.local_endpoint().port();
}

}  // namespace ddprun::agent
