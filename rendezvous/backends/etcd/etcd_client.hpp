#pragma once
// A client of one etcd cluster's v3 JSON gateway: POSTs a request to a member and, when that
// member fails (refused, reset, timed out, no leader, garbage), to the next one, until the
// request's deadline. Reads are linearizable (etcd's default), so any member will do.
//
// Connections: a few kept alive per member and reused; at most kMaxConnections exchanges in
// flight, later requests queue. Streams (watches) get connections of their own
// (stream_connection).
// Threading: one io_context thread; the handler of call() runs there, never inside call().
// Retry policy: Retry::kAlways for reads and writes that may be repeated; kUnlessMaybeApplied
// stops at the first failure after which etcd may have applied the request (the caller then
// finds out, see CasUpdate), and reports it with maybe_applied set.
// Authentication (options.auth): before the first request, one /v3/auth/authenticate trades
// the user and password for a token, which every request then carries (Authorization). When
// etcd calls the token stale (simple tokens expire after --auth-token-ttl), the client fetches
// a new one and repeats the request. Refused credentials are final: every call from then on
// fails at once with the same message, so a wrong password costs one exchange, not a storm.

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_failure.hpp"
#include "rendezvous/backends/etcd/etcd_messages.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/backends/etcd/failover_log.hpp"
#include "rendezvous/backends/etcd/http_connection.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"
#include "rendezvous/backends/etcd/range_coalescer.hpp"

namespace ddprun::rendezvous::backends::etcd {

class EtcdClient {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Retry { kAlways, kUnlessMaybeApplied };
  using Outcome = std::variant<nlohmann::json, EtcdFailure>;
  using Handler = std::function<void(Outcome)>;

  // Exchanges in flight at once; more wait in a queue.
  static constexpr std::size_t kMaxConnections = 32;
  // Idle connections kept per member for reuse.
  static constexpr std::size_t kMaxIdlePerMember = 4;
  // Pause after every member failed once, doubling up to the cap (bounded by the deadline).
  static constexpr std::chrono::milliseconds kFirstBackoff{50};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};

  // options must be valid (validate()); throws std::invalid_argument when TLS files are unusable.
  EtcdClient(boost::asio::io_context& io, EtcdOptions options);
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;
  ~EtcdClient();

  // POSTs body to path (e.g. "/v3/kv/range"); the handler gets the parsed JSON of a 200
  // reply, or the failure once no member could serve it before deadline. Ranges (kAlways)
  // issued in the same event-loop turn go out together as one txn (RangeCoalescer).
  void call(std::string path, std::string body, Retry retry, Clock::time_point deadline,
            Handler done);

  // Runs then(nullptr) once a token is at hand (at once when auth is off or a token is
  // cached), or then(&failure) when none could be had. Handlers run on the io_context thread.
  using TokenHandler = std::function<void(const EtcdFailure* failure)>;
  void with_token(TokenHandler then);
  // The Authorization header's value for streams: the current token, or empty.
  std::string token() const { return token_; }
  // etcd called this token stale: the next with_token() fetches a new one.
  void token_rejected(const std::string& token);

  // Closes every connection; pending calls never complete. Later calls fail.
  void close();

  // For streams: a connection of their own to a member, and the member to try first.
  std::shared_ptr<HttpConnection> stream_connection(std::size_t member);
  std::size_t preferred_member() const { return preferred_; }
  // A member failed: prefer the next one from now on (if it was the preferred one).
  void member_failed(std::size_t member);
  // A member served a request: prefer it.
  void member_served(std::size_t member) { preferred_ = member; }

  boost::asio::io_context& io() { return io_; }
  const EtcdOptions& options() const { return options_; }
  const std::vector<EtcdEndpoint>& endpoints() const { return options_.endpoints; }
  // "etcd 127.0.0.1:2379,127.0.0.2:2379"
  std::string describe() const;

 private:
  struct Call;
  void submit(std::string path, std::string body, Retry retry, Clock::time_point deadline,
              Handler done);
  void attempt(const std::shared_ptr<Call>& call);
  // attempt() once a token is at hand (at once without auth); fails the call without one.
  void attempt_with_token(const std::shared_ptr<Call>& call);
  void on_reply(const std::shared_ptr<Call>& call, std::size_t member, HttpConnection& connection,
                HttpReply reply);
  // Why an attempt on a member failed, and whether its request may have been applied.
  struct AttemptTrouble {
    FailoverLog::Trouble trouble;
    bool maybe_applied = false;
    std::string detail;
  };
  // An HTTP answer from a member: nullopt when it finished the call (served, or refused by etcd
  // itself, or retried with a fresh token), else why the next member should be tried.
  std::optional<AttemptTrouble> judge_answer(const std::shared_ptr<Call>& call, std::size_t member,
                                             const HttpReply& reply);
  void next_member(const std::shared_ptr<Call>& call);
  void give_up(const std::shared_ptr<Call>& call);
  void finish(const std::shared_ptr<Call>& call, Outcome outcome);
  void authenticate();
  void on_authenticated(Outcome outcome);
  // etcd refused the call's token as stale: fetch a fresh one and try again (a few times).
  bool retry_with_fresh_token(const std::shared_ptr<Call>& call, const ErrorReply& error);
  void serve_waiting();
  std::shared_ptr<HttpConnection> take_connection(std::size_t member);
  void keep_connection(std::size_t member, std::shared_ptr<HttpConnection> connection);

  boost::asio::io_context& io_;
  EtcdOptions options_;
  std::shared_ptr<const TlsContext> tls_;
  std::size_t preferred_ = 0;
  std::size_t active_ = 0;
  bool closed_ = false;
  std::vector<std::vector<std::shared_ptr<HttpConnection>>> idle_;  // per member
  std::vector<std::weak_ptr<HttpConnection>> open_;  // every connection handed out, to close
  std::deque<std::shared_ptr<Call>> waiting_;
  std::string token_;  // empty: none yet (or auth is off)
  bool authenticating_ = false;
  std::vector<TokenHandler> token_waiters_;
  std::optional<EtcdFailure> credentials_refused_;
  RangeCoalescer ranges_;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
