#include "agent/health/health_server.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "agent/health/health_http.hpp"
#include "agent/health/job_api.hpp"
#include "agent/health/job_page_access.hpp"
#include "agent/health/job_page_html.hpp"
#include "agent/health/node_record.hpp"
#include "agent/health/prometheus_text.hpp"
#include "agent/health/trainer_progress.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

// "host:port" (checked where it entered, job_view_exchange.cpp) as a URL's authority: an IPv6
// address in brackets.
std::string url_location(const std::string& location) {
  const auto colon = location.rfind(':');
  const std::string host = location.substr(0, colon);
  return (host.find(':') == std::string::npos ? host : "[" + host + "]") + location.substr(colon);
}

// Since the bundled trainer's last snapshot, from the metrics lines its rank 0 copies here.
std::optional<double> last_snapshot_age(const std::string& trainer_metrics_path) {
  if (trainer_metrics_path.empty())
    return std::nullopt;
  const auto snapshot = trainer_progress(read_tail(trainer_metrics_path))["snapshot"];
  if (!snapshot.is_object() || !snapshot["unix_time"].is_number())
    return std::nullopt;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return std::max(0.0, now - snapshot["unix_time"].get<double>());
}

// The target's query ("?..." or ""), printable ASCII only, for a redirect's Location header.
std::string printable_query(std::string_view head) {
  const std::string_view target = request_target(head);
  const auto question = target.find('?');
  std::string query;
  if (question == std::string_view::npos)
    return query;
  for (const char c : target.substr(question, target.find('#', question) - question))
    if (c > ' ' && c < 127)
      query += c;
  return query;
}

}  // namespace

struct HealthServer::Loop {
  Loop(HealthBoard& health_board, common::Seconds stale, JobPageOptions page_options)
      : board(health_board), stale_after(stale), page(std::move(page_options)) {}

  // The response to a GET: the health report (200 while the agent's loop progresses, 503 once
  // it has stalled), the metrics, the job page and its API (with its token, when the job has a
  // secret), or 404.
  std::string answer(std::string_view head) {
    const HealthRoute route = route_of(request_path(head));
    const bool post = classify_request(head) == HealthRequest::kPost;
    if (post && route != HealthRoute::kJobStacks)
      return http_response(405, "only GET is served here\n", kPlainText);
    switch (route) {
      case HealthRoute::kNotFound:
        return http_response(404, "not found: the health port serves /health, /metrics, /job/\n",
                             kPlainText);
      case HealthRoute::kJobPage:
      case HealthRoute::kJobPageRedirect:
      case HealthRoute::kJobState:
      case HealthRoute::kJobStacks:
        if (!may_view_job_page(head, page.token))
          return http_response(
              401, "the job page needs its token: open the URL the agent printed\n", kPlainText);
        break;
      default:
        break;
    }
    const bool alive =
        HealthBoard::Clock::now() - board.last_progress() <= common::steady(stale_after);
    last_state = board.state_or(last_state);
    if ((route == HealthRoute::kJobPage || route == HealthRoute::kJobPageRedirect) &&
        !last_state.page_location.empty())
      return redirect_response("http://" + url_location(last_state.page_location) + "/job/" +
                               printable_query(head));
    if (route == HealthRoute::kJobPage)
      return http_response(200, job_page_html(), kHtml);
    if (route == HealthRoute::kJobPageRedirect)
      return redirect_response("/job/" + printable_query(head));
    if (route == HealthRoute::kMetrics)
      return http_response(200,
                           prometheus_text(last_state, alive, board.last_progress_unix_s(),
                                           last_snapshot_age(last_state.trainer_metrics_path)),
                           kPrometheusContentType);
    if (route == HealthRoute::kJobStacks) {
      if (post && page.stacks)
        board.ask_for_stacks();
      last_stacks = board.stacks_or(last_stacks);
      if (post && page.stacks && last_stacks.phase != PageStacksState::Phase::kCapturing)
        last_stacks = {PageStacksState::Phase::kCapturing, last_stacks.request, "", {}};
      return http_response(post ? 202 : 200, stacks_state_json(last_stacks, page.stacks));
    }
    if (route == HealthRoute::kJobState) {
      board.note_viewed();
      last_events = board.events_or(last_events);
      last_peers = board.peers_or(last_peers);
      const nlohmann::json trainer =
          last_state.trainer_metrics_path.empty()
              ? nlohmann::json()
              : trainer_progress(read_tail(last_state.trainer_metrics_path));
      return http_response(200, job_state_json(last_state, nodes_of(alive), last_events, trainer));
    }
    return http_response(
        alive ? 200 : 503,
        health_body(last_state, alive, board.last_progress_unix_s(), stale_after.count()));
  }

  // This node's record, then every other node's as last read (or why there is none).
  std::vector<NodeView> nodes_of(bool alive) const {
    std::vector<NodeView> nodes;
    nodes.push_back({last_state.group_rank,
                     node_record_of(last_state, alive, board.last_progress_unix_s()), ""});
    for (const auto& peer : last_peers) {
      NodeView node{peer.group_rank, std::nullopt, "no record yet"};
      if (!peer.record.empty()) {
        try {
          node.record = node_record_from_json(peer.record);
          node.record->group_rank = peer.group_rank;  // its key says which node it is
        } catch (const std::invalid_argument& error) {
          node.problem = std::string("unreadable record: ") + error.what();
        }
      }
      nodes.push_back(std::move(node));
    }
    return nodes;
  }

  void accept_next();

  HealthBoard& board;  // the server only reads it, and notes views and stacks asked for
  const common::Seconds stale_after;
  const JobPageOptions page;
  HealthState last_state;  // what the board said last; used while the loop holds its lock
  std::deque<std::string> last_events;  // likewise
  std::vector<PeerRecord> last_peers;   // likewise
  PageStacksState last_stacks;          // likewise
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
        self->respond(http_response(408, "request not complete in time\n", kPlainText));
      }
    });
    read_head(answer);
  }

 private:
  template <class Answer>
  void read_head(Answer answer) {
    socket_.async_read_some(
        asio::buffer(chunk_), [self = shared_from_this(), answer](
                                  const boost::system::error_code& error, std::size_t bytes) {
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
            case HealthRequest::kPost:
              self->respond(complete ? answer(self->head_)
                                     : http_response(431, "request head too large\n", kPlainText));
              return;
            case HealthRequest::kOtherVerb:
              self->respond(http_response(405, "only GET is served here\n", kPlainText));
              return;
            case HealthRequest::kMalformed:
              self->respond(http_response(400, "not an HTTP request\n", kPlainText));
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
      std::make_shared<Connection>(std::move(socket), open_connections)
          ->start([this](std::string_view head) { return answer(head); });
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
                           HealthBoard& board, JobPageOptions page)
    : loop_(std::make_unique<Loop>(board, stale_after, std::move(page))) {
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
