#pragma once
// One TCP connection from StoreKv to a TCPStore-protocol server. Requests go out back to back
// without waiting for earlier replies (pipelining); the server answers them in order, so each
// reply belongs to the oldest request still waiting for one. Every request but a WAIT must be
// answered within the operation timeout, and every length read from the network is bounded.
//
// Threading: one io_context thread; no handler runs inside the call that queued its request.
// Error policy: the first failure (closed, reset, no answer in time, a malformed or oversized
// reply) ends the connection for good: the failure callback runs, then every request still
// outstanding gets the failure, once. close() ends it quietly: no handler runs afterwards.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/round/kv_ops.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::rendezvous::backends {

class StoreKvConnection : public std::enable_shared_from_this<StoreKvConnection> {
 public:
  using Clock = std::chrono::steady_clock;

  // What the reply to a request looks like on the wire.
  enum class ReplyShape : uint8_t {
    none,     // no reply (SET, APPEND, MULTI_SET, VALIDATE): done once a later reply arrives
    check,    // u8 READY or NOT_READY
    integer,  // i64
    value,    // u64 length, then the bytes
    values,   // `count` values back to back (MULTI_GET)
    echo,     // u32 (PING)
    wait,     // u8 STOP_WAITING once every key exists; no deadline
    // AUTH_HELLO (store/job_auth.hpp): u8 CHALLENGE then the nonce (ready, value), or u8
    // NOT_REQUIRED (ready=false).
    auth_challenge,
    auth_verdict,  // AUTH_PROOF: u8 ACCEPTED (ready) or REFUSED
  };

  struct Reply {
    bool ready = false;  // check; wait (false: the wait was cancelled before it finished)
    int64_t integer = 0;
    uint32_t echo = 0;
    std::string value;
    std::vector<std::string> values;
  };

  struct Failure {
    round::KvErrorKind kind = round::KvErrorKind::kUnreachable;
    std::string reason;  // "the server closed the connection", "no answer within 500 ms", ...
  };

  using Outcome = std::variant<Reply, Failure>;
  using ReplyHandler = std::function<void(Outcome&)>;

  struct Limits {
    std::chrono::milliseconds op_timeout{0};  // answer deadline of every request but WAIT
    std::size_t max_reply_bytes = 0;          // longest reply (all of a MULTI_GET's values)
  };

  StoreKvConnection(boost::asio::io_context& io, Limits limits);
  StoreKvConnection(const StoreKvConnection&) = delete;
  StoreKvConnection& operator=(const StoreKvConnection&) = delete;
  ~StoreKvConnection();

  // Connects to the first endpoint that accepts before `deadline`; done(nullopt) on success.
  // A connection to itself (Linux's simultaneous open on an unused local port) is refused.
  void connect(const std::vector<boost::asio::ip::tcp::endpoint>& endpoints,
               Clock::time_point deadline, std::function<void(std::optional<Failure>)> done);

  // Queues a request (sent with the others queued in the same turn of the loop). `what` names
  // it in failure messages; `count` is the number of values a `values` reply holds.
  void send(std::string bytes, ReplyShape shape, std::string what, ReplyHandler handler,
            std::size_t count = 0);

  // The request that closes a batch ending in a request without reply, so that the batch's
  // completion is confirmed (a CHECK of no keys). Set once the generation is known.
  void set_fence(std::string fence) { fence_ = std::move(fence); }

  // G2: cancels the WAIT outstanding on this connection (it must be the only request): sends
  // CANCEL_WAIT and gives the WAIT's answer to `handler` instead: ready=false once cancelled,
  // ready=true when the wait finished just before the cancel reached the server.
  void cancel_wait(std::string request, ReplyHandler handler);

  // Runs once when the connection fails, before the outstanding requests hear of it; also
  // when the server closes an idle connection.
  void on_failure(std::function<void(const Failure&)> handler) { on_failure_ = std::move(handler); }

  // Said after "the server closed the connection" when the server closes it before it answered
  // any request sent from now on (why a store might refuse this client at its first request).
  void set_first_reply_hint(std::string hint) { first_reply_hint_ = std::move(hint); }

  // Ends the connection as a failure of its own would, for an answer that leaves it of no use
  // (the store refused the job secret): on_failure runs, then every request still outstanding
  // hears `failure`.
  void abort(const Failure& failure) { fail(failure.kind, failure.reason); }

  // Closes at once; no handler or callback runs afterwards.
  void close();

  bool is_open() const { return !closed_; }
  // Requests sent and not answered yet.
  std::size_t outstanding() const { return entries_.size(); }

 private:
  struct Entry {
    ReplyShape shape = ReplyShape::none;
    bool cancelled_wait = false;  // a WAIT followed by CANCEL_WAIT: one or two status bytes
    std::size_t count = 0;
    std::string what;
    ReplyHandler handler;
    std::optional<Clock::time_point> deadline;
    // A MULTI_GET's values as they arrive, and the bytes they took.
    std::vector<std::string> values;
    std::size_t reply_bytes = 0;
  };
  enum class Parse { complete, need_more, violation };

  void arm_read();
  void on_read(std::size_t received);
  void parse_replies();
  Parse parse(Entry& entry, Reply& reply, std::string& violation);
  Parse parse_wait(const Entry& entry, Reply& reply, std::string& violation);
  Parse parse_auth(ReplyShape shape, Reply& reply, std::string& violation);
  bool parse_value(Entry& entry, std::string& value, std::string& violation, Parse& status);
  void schedule_flush();
  void flush();
  void on_written(const boost::system::error_code& error);
  void arm_reply_timer();
  void on_reply_timer();
  void fail(round::KvErrorKind kind, const std::string& reason);
  void shut_socket();
  std::size_t available() const { return input_.size() - consumed_; }

  boost::asio::io_context& io_;
  Limits limits_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer reply_timer_;
  std::function<void(const Failure&)> on_failure_;
  std::string fence_;
  std::string first_reply_hint_;
  std::deque<Entry> entries_;   // sent (or queued to send), not yet answered, oldest first
  std::string pending_output_;  // queued this turn, not yet handed to the socket
  std::string writing_;         // handed to the async write in flight
  std::unique_ptr<char[]> read_chunk_;
  std::string input_;  // received, not yet parsed from consumed_ on
  std::size_t consumed_ = 0;
  bool write_in_flight_ = false;
  bool flush_posted_ = false;
  bool reply_timer_armed_ = false;
  bool connected_ = false;
  bool closed_ = false;     // the socket is closed
  bool abandoned_ = false;  // close() was called: no handler runs any more
};

}  // namespace ddprun::rendezvous::backends
