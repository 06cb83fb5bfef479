// The Boost.Asio driver of the store: accepts connections, owns the state and routes the
// messages it produces. Everything runs on one event-loop thread, so the state needs no lock.

#include "rendezvous/store/store_server.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/store/asio.hpp"
#include "rendezvous/store/memory_budget.hpp"
#include "rendezvous/store/store_connection.hpp"
#include "rendezvous/store/store_state.hpp"

namespace ddprun::rendezvous::store {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr std::size_t kReadBufferBytes = 64 * 1024;
// Listen backlog: connection storms of a whole job arrive at once (the kernel caps this at
// net.core.somaxconn).
constexpr int kListenBacklog = 65535;
// After accept() fails (e.g. out of descriptors), wait this long before accepting again.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);
// With a job secret: a connection that has neither proved it nor made a request by then is
// closed (an agent proves it in one round trip, PyTorch's clients ask at once), checked this
// often.
constexpr auto kOpeningTimeout = std::chrono::seconds(5);
constexpr auto kOpeningSweep = std::chrono::seconds(1);
// Connections taken from the backlog per trip through the event loop.
constexpr int kAcceptBatch = 64;
// Reads of clients without the proof (with a job secret) armed per trip through the event loop.
constexpr int kDeferredReadsPerTurn = 8;
// Lines about closed connections per second; a flood of them is summed up instead.
constexpr std::size_t kViolationLinesPerSecond = 10;

// The connections without the secret may hold at most these shares of the descriptors (and of
// --max-connections): a quarter opening, a half clients without the proof, so that the agents'
// always find one.
std::size_t capped(std::size_t wanted, std::size_t max_connections, std::size_t divisor) {
  rlimit limit{};
  std::size_t descriptors = max_connections;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    descriptors = std::min<std::size_t>(descriptors, limit.rlim_cur);
  }
  return std::max<std::size_t>(1, std::min(wanted, descriptors / divisor));
}

tcp::endpoint listen_endpoint(const std::string& host, std::uint16_t port) {
  if (host.empty() || host == "0.0.0.0" || host == "*") {
    return {tcp::v4(), port};
  }
  if (host == "::") {
    return {tcp::v6(), port};
  }
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (!error) {
    return {address, port};
  }
  asio::io_context resolver_context;
  tcp::resolver resolver(resolver_context);
  const auto results = resolver.resolve(host, std::to_string(port), error);
  if (error || results.empty()) {
    throw std::runtime_error("ddprun-store: cannot resolve listen host '" + host +
                             "': " + error.message());
  }
  return results.begin()->endpoint();
}

class StoreServerImpl final : public StoreServer, public ConnectionHub {
 public:
  explicit StoreServerImpl(const StoreServerOptions& options)
      : options_(options),
        budget_(options.limits.max_total_bytes),
        open_budget_(options.limits.max_open_bytes),
        state_(budget_, options.secret.empty() ? budget_ : open_budget_),
        opening_cap_(
            capped(options.limits.max_opening_connections, options.limits.max_connections, 4)),
        guest_cap_(capped(options.limits.max_guest_connections, options.limits.max_connections, 2)),
        // One thread runs every handler, so the reactor's per-descriptor locks are dead
        // weight; the scheduler keeps its lock, which stop()'s post from outside needs.
        io_(std::make_unique<asio::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO)),
        acceptor_(*io_),
        retry_timer_(*io_),
        sweep_timer_(*io_),
        // Not zero-filled: only the bytes reads bring in become resident.
        read_buffer_(std::make_unique_for_overwrite<std::uint8_t[]>(kReadBufferBytes)) {
    const auto endpoint = listen_endpoint(options.host, options.port);
    const std::string where = options.host + ":" + std::to_string(options.port);
    boost::system::error_code error;
    acceptor_.open(endpoint.protocol(), error);
    if (!error) {
      acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
    }
    if (!error && endpoint.address().is_v6()) {
      acceptor_.set_option(asio::ip::v6_only(false), error);
    }
    if (!error) {
      acceptor_.bind(endpoint, error);
    }
    if (!error) {
      acceptor_.listen(kListenBacklog, error);
    }
    if (error) {
      throw std::runtime_error("ddprun-store: cannot listen on " + where + ": " + error.message());
    }
    acceptor_.non_blocking(true, error);  // accept_waiting() must never wait
    port_ = acceptor_.local_endpoint().port();
    accept_next();
    if (!options_.secret.empty()) {
      sweep_openings();
    }
    loop_ = std::thread([this] { io_->run(); });
  }

  ~StoreServerImpl() override {
    stop();
    // The io_context member, destroyed after the acceptor and timer, then drops the
    // handlers that still hold connections; budget_ and state_ outlive it.
    connections_.clear();
  }

  std::uint16_t port() const override { return port_; }
  std::string host() const override { return options_.host; }

  void stop() override {
    if (stopped_.exchange(true)) {
      return;
    }
    if (loop_.joinable()) {
      asio::post(*io_, [this] {
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        retry_timer_.cancel();
        sweep_timer_.cancel();
        for (auto& [id, connection] : connections_) {
          connection->abandon();
        }
        io_->stop();
      });
      if (loop_.get_id() == std::this_thread::get_id()) {
        loop_.detach();
      } else {
        loop_.join();
      }
    }
  }

  std::size_t connection_count() const override { return connection_count_.load(); }
  std::size_t memory_used() const override { return memory_used_.load(); }

 private:
  void accept_next() {
    acceptor_.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
      if (error == asio::error::operation_aborted || !acceptor_.is_open()) {
        return;
      }
      if (error) {
        // Typically EMFILE: keep the server alive and try again shortly.
        store_log(options_.log_level, StoreLogLevel::warning, "accept failed: " + error.message());
        retry_timer_.expires_after(kAcceptRetryDelay);
        retry_timer_.async_wait([this](const boost::system::error_code& timer_error) {
          if (!timer_error) {
            accept_next();
          }
        });
        return;
      }
      admit(std::move(socket));
      accept_waiting();
      accept_next();
    });
  }

  // Takes the connections already waiting in the backlog at once, up to a batch: a storm of
  // connections (a job's, or strangers') then costs one trip through the event loop per batch,
  // and whoever is behind it (an agent) is reached sooner.
  void accept_waiting() {
    for (int taken = 0; taken < kAcceptBatch && acceptor_.is_open(); ++taken) {
      boost::system::error_code error;
      tcp::socket socket = acceptor_.accept(error);
      if (error) {
        return;  // would_block: the backlog is empty (other errors: the async accept sees them)
      }
      admit(std::move(socket));
    }
  }

  void admit(tcp::socket socket) {
    if (connections_.size() >= options_.limits.max_connections) {
      boost::system::error_code ignored;
      const auto peer = socket.remote_endpoint(ignored);
      log_violation(
          peer.address().to_string() + ":" + std::to_string(peer.port()),
          "connection limit of " + std::to_string(options_.limits.max_connections) + " reached");
      socket.close(ignored);
      return;
    }
    if (!options_.secret.empty() && opening_.size() >= opening_cap_) {
      // The oldest opening goes: an agent proves the secret within a round trip, so a flood
      // of connections that do nothing pushes out only its own.
      expel(opening_.begin()->first,
            "closed for a newer connection: " + std::to_string(opening_cap_) +
                " connections have neither proved the job secret "
                "nor made a request");
    }
    const ConnectionId id = next_connection_++;
    auto connection = std::make_shared<StoreConnection>(std::move(socket), id, *this);
    connections_.emplace(id, connection);
    if (!options_.secret.empty()) {
      opening_.emplace(id, Clock::now() + kOpeningTimeout);
    }
    connection_count_.store(connections_.size());
    connection->start();
  }

  std::optional<std::string> dispatch(ConnectionId from, Request& request) override {
    outgoing_.clear();
    auto error = state_.handle(from, request, outgoing_);
    // Deliver even after an error: wake-ups already produced belong to other clients.
    for (auto& message : outgoing_) {
      const auto found = connections_.find(message.to);
      if (found == connections_.end()) {
        continue;
      }
      const auto target = found->second;  // keeps it alive if delivering closes it
      target->queue_output(message.bytes);
      if (message.to != from) {
        target->flush();
      }
    }
    memory_used_.store(total_used());
    return error;
  }

  // Connections that have not left their opening by their deadline are closed; ids grow with
  // time, so the expired ones are at the front.
  void sweep_openings() {
    std::vector<ConnectionId> expired;
    const auto now = Clock::now();
    for (const auto& [id, deadline] : opening_) {
      if (deadline > now) {
        break;
      }
      expired.push_back(id);
    }
    for (const ConnectionId id : expired) {
      expel(id, "neither proved the job secret nor made a request within " +
                    std::to_string(kOpeningTimeout.count()) + " s");
    }
    sweep_timer_.expires_after(kOpeningSweep);
    sweep_timer_.async_wait([this](const boost::system::error_code& error) {
      if (!error) {
        sweep_openings();
      }
    });
  }

  void expel(ConnectionId id, const std::string& reason) {
    const auto found = connections_.find(id);
    if (found == connections_.end()) {
      opening_.erase(id);
      return;
    }
    const auto connection = found->second;  // alive while it closes
    connection->expel(reason);
  }

  bool admit_guest(ConnectionId id) override {
    opening_.erase(id);
    if (guests_.size() >= guest_cap_) {
      return false;
    }
    guests_.insert(id);
    return true;
  }

  void defer_read(const std::shared_ptr<StoreConnection>& connection) override {
    deferred_reads_.push_back(connection);
    if (!deferred_turn_posted_) {
      deferred_turn_posted_ = true;
      asio::post(*io_, [this] { take_deferred_turn(); });
    }
  }

  // Arms a few deferred reads, then queues the next turn behind whatever else is waiting.
  void take_deferred_turn() {
    deferred_turn_posted_ = false;
    for (int armed = 0; armed < kDeferredReadsPerTurn && !deferred_reads_.empty(); ++armed) {
      const auto connection = deferred_reads_.front().lock();
      deferred_reads_.pop_front();
      if (connection) {
        connection->arm_deferred_read();
      }
    }
    if (!deferred_reads_.empty() && !stopped_) {
      deferred_turn_posted_ = true;
      asio::post(*io_, [this] { take_deferred_turn(); });
    }
  }

  void admit_agent(ConnectionId id) override {
    opening_.erase(id);
    guests_.erase(id);
  }

  void connection_closed(ConnectionId id) override {
    state_.disconnect(id);
    opening_.erase(id);
    guests_.erase(id);
    connections_.erase(id);
    connection_count_.store(connections_.size());
    memory_used_.store(total_used());
  }

  void log_violation(const std::string& peer, const std::string& reason) override {
    const auto now = Clock::now();
    if (now - violation_window_ >= std::chrono::seconds(1)) {
      if (violations_unlisted_ > 0) {
        store_log(options_.log_level, StoreLogLevel::warning,
                  "closed " + std::to_string(violations_unlisted_) +
                      " more connections in one second (not listed)");
      }
      violation_window_ = now;
      violations_listed_ = 0;
      violations_unlisted_ = 0;
    }
    if (violations_listed_ >= kViolationLinesPerSecond) {
      ++violations_unlisted_;
      return;
    }
    ++violations_listed_;
    store_log(options_.log_level, StoreLogLevel::warning,
              "closing connection from " + peer + ": " + reason);
  }

  std::size_t total_used() const {
    return budget_.used() + (options_.secret.empty() ? 0 : open_budget_.used());
  }

  MemoryBudget& budget(bool trusted) override { return trusted ? budget_ : open_budget_; }
  const StoreLimits& limits() const override { return options_.limits; }
  WireGeneration legacy_generation() const override { return options_.legacy_generation; }
  std::string_view secret() const override { return options_.secret; }
  std::span<std::uint8_t> read_buffer() override { return {read_buffer_.get(), kReadBufferBytes}; }

  StoreServerOptions options_;
  using Clock = std::chrono::steady_clock;

  MemoryBudget budget_;       // the agents' (everything, without a job secret)
  MemoryBudget open_budget_;  // with a job secret: what any other client holds
  StoreState state_;
  std::size_t opening_cap_;
  std::size_t guest_cap_;
  // With a job secret: connections still in their opening, by id (oldest first), with their
  // deadline; and those that made requests without the proof.
  std::map<ConnectionId, Clock::time_point> opening_;
  std::unordered_set<ConnectionId> guests_;
  std::deque<std::weak_ptr<StoreConnection>> deferred_reads_;
  bool deferred_turn_posted_ = false;
  Clock::time_point violation_window_;
  std::size_t violations_listed_ = 0;
  std::size_t violations_unlisted_ = 0;
  std::unique_ptr<asio::io_context> io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer sweep_timer_;
  std::unique_ptr<std::uint8_t[]> read_buffer_;
  std::vector<OutgoingMessage> outgoing_;  // reused by dispatch()
  std::unordered_map<ConnectionId, std::shared_ptr<StoreConnection>> connections_;
  ConnectionId next_connection_ = 1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
  std::atomic<std::size_t> connection_count_{0};
  std::atomic<std::size_t> memory_used_{0};
  std::thread loop_;
};

}  // namespace

std::unique_ptr<StoreServer> StoreServer::start(const StoreServerOptions& options) {
  return std::make_unique<StoreServerImpl>(options);
}

}  // namespace ddprun::rendezvous::store
