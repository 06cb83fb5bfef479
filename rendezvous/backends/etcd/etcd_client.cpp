// EtcdClient: one request tried member after member until it succeeds or its deadline passes.

#include "rendezvous/backends/etcd/etcd_client.hpp"

#include <algorithm>
#include <random>

#include "rendezvous/backends/etcd/etcd_codec.hpp"
#include "rendezvous/backends/etcd/failover_log.hpp"
#include "rendezvous/backends/etcd/tls_context.hpp"
#include "rendezvous/backends/etcd/transport_trouble.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

std::size_t random_member(std::size_t members) {
  std::random_device device;
  return std::uniform_int_distribution<std::size_t>(0, members - 1)(device);
}

using Trouble = FailoverLog::Trouble;

constexpr unsigned kHttpOk = 200;
constexpr unsigned kHttpTooManyRequests = 429;
constexpr unsigned kHttpInternalError = 500;
constexpr unsigned kHttpUnavailable = 503;

// etcd's gateway answers "etcdserver: no leader" when the hasleader header meets a member
// without a leader: the request was refused before it was proposed.
bool is_no_leader(const std::string& message) {
  return message.find("no leader") != std::string::npos;
}

std::string operation_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

struct EtcdClient::Call {
  Call(boost::asio::io_context& io, const std::vector<EtcdEndpoint>& endpoints)
      : log(endpoints), backoff_timer(io) {}
  std::string path;
  std::string body;
  Retry retry = Retry::kAlways;
  Clock::time_point deadline;
  Clock::time_point started;
  Handler done;
  FailoverLog log;
  std::size_t member = 0;
  std::size_t tried = 0;   // attempts so far
  bool anonymous = false;  // the authenticate call itself: no token
  std::string token;       // the token this attempt carried
  int fresh_tokens = 0;    // how often a stale token was replaced for this call
  std::chrono::milliseconds backoff = kFirstBackoff;
  boost::asio::steady_timer backoff_timer;
};

EtcdClient::EtcdClient(boost::asio::io_context& io, EtcdOptions options)
    : io_(io),
      options_(std::move(options)),
      tls_(options_.tls.enabled ? TlsContext::create(options_.tls) : nullptr),
      // A random first member: agents spread over the members' gateways instead of all
      // loading the first one of the list.
      preferred_(random_member(options_.endpoints.size())),
      idle_(options_.endpoints.size()),
      ranges_(io, describe(),
              [this](std::string path, std::string body, Clock::time_point deadline, Handler done) {
                submit(std::move(path), std::move(body), Retry::kAlways, deadline, std::move(done));
              }) {}

EtcdClient::~EtcdClient() {
  close();
}

std::string EtcdClient::describe() const {
  return std::string("etcd ") + (options_.tls.enabled ? "https " : "") +
         format_endpoints(options_.endpoints);
}

void EtcdClient::call(std::string path, std::string body, Retry retry, Clock::time_point deadline,
                      Handler done) {
  if (path == "/v3/kv/range" && retry == Retry::kAlways && !closed_) {
    ranges_.read(std::move(body), deadline, std::move(done));
    return;
  }
  submit(std::move(path), std::move(body), retry, deadline, std::move(done));
}

void EtcdClient::submit(std::string path, std::string body, Retry retry, Clock::time_point deadline,
                        Handler done) {
  auto call = std::make_shared<Call>(io_, options_.endpoints);
  call->path = std::move(path);
  call->body = std::move(body);
  call->retry = retry;
  call->deadline = deadline;
  call->started = Clock::now();
  call->done = std::move(done);
  call->member = preferred_;
  if (closed_) {
    boost::asio::post(io_, lifetime_.guard([this, call] {
      EtcdFailure failure;
      failure.kind = round::KvErrorKind::kUnreachable;
      failure.message = describe() + ": the etcd client is closed";
      finish(call, std::move(failure));
    }));
    return;
  }
  attempt_with_token(call);
}

void EtcdClient::attempt_with_token(const std::shared_ptr<Call>& call) {
  with_token([this, call](const EtcdFailure* failure) {
    if (failure != nullptr) {
      finish(call, *failure);
      return;
    }
    attempt(call);
  });
}

void EtcdClient::with_token(TokenHandler then) {
  if (!options_.auth.enabled() || !token_.empty()) {
    then(nullptr);
    return;
  }
  if (credentials_refused_) {
    boost::asio::post(
        io_, lifetime_.guard([this, then = std::move(then)] { then(&*credentials_refused_); }));
    return;
  }
  token_waiters_.push_back(std::move(then));
  if (!authenticating_) {
    authenticate();
  }
}

void EtcdClient::token_rejected(const std::string& token) {
  if (token == token_) {
    token_.clear();
  }
}

void EtcdClient::authenticate() {
  authenticating_ = true;
  auto call = std::make_shared<Call>(io_, options_.endpoints);
  call->path = "/v3/auth/authenticate";
  call->body = EtcdCodec::authenticate(options_.auth.user, options_.auth.password);
  call->deadline = Clock::now() + options_.failover_budget;
  call->started = Clock::now();
  call->anonymous = true;
  call->member = preferred_;
  call->done = [this](Outcome outcome) { on_authenticated(std::move(outcome)); };
  attempt(call);
}

void EtcdClient::on_authenticated(Outcome outcome) {
  authenticating_ = false;
  std::optional<EtcdFailure> failure;
  if (auto* refused = std::get_if<EtcdFailure>(&outcome)) {
    failure = std::move(*refused);
    if (failure->kind == round::KvErrorKind::kRejected) {
      // etcd answered: wrong user or password, or auth not enabled. Asking again will not help.
      // "... etcd rejected the authenticate (HTTP 400): <etcd's reason>"
      const auto reason_at = failure->message.find("): ");
      const std::string reason = reason_at == std::string::npos
                                     ? failure->message
                                     : failure->message.substr(reason_at + 3);
      failure->message = "etcd at " + format_endpoints(options_.endpoints) +
                         ": authentication failed for user '" + options_.auth.user + "' (" +
                         reason + ")";
      credentials_refused_ = failure;
    }
  } else {
    try {
      token_ = EtcdCodec::decode_auth_token(std::get<nlohmann::json>(outcome));
    } catch (const EtcdProtocolError& error) {
      failure.emplace();
      failure->kind = round::KvErrorKind::kProtocol;
      failure->message = describe() + ": " + error.what();
    }
  }
  auto waiters = std::move(token_waiters_);
  token_waiters_.clear();
  for (auto& then : waiters) {
    then(failure ? &*failure : nullptr);
  }
}

bool EtcdClient::retry_with_fresh_token(const std::shared_ptr<Call>& call,
                                        const ErrorReply& error) {
  constexpr int kMaxFreshTokens = 3;
  if (call->anonymous || !options_.auth.enabled() || !EtcdCodec::is_stale_token(error) ||
      call->fresh_tokens >= kMaxFreshTokens) {
    return false;
  }
  ++call->fresh_tokens;
  token_rejected(call->token);
  attempt_with_token(call);
  return true;
}

void EtcdClient::attempt(const std::shared_ptr<Call>& call) {
  if (active_ >= kMaxConnections) {
    waiting_.push_back(call);
    return;
  }
  const std::size_t member = call->member;
  auto connection = take_connection(member);
  ++active_;
  ++call->tried;
  const auto deadline = std::min(Clock::now() + options_.op_timeout, call->deadline);
  call->token = call->anonymous ? std::string() : token_;
  connection->exchange(call->path, call->body, call->token, deadline,
                       lifetime_.guard([this, call, member, connection](HttpReply reply) {
                         --active_;
                         if (connection->reusable()) {
                           keep_connection(member, connection);
                         }
                         on_reply(call, member, *connection, std::move(reply));
                         serve_waiting();
                       }));
}

void EtcdClient::serve_waiting() {
  while (active_ < kMaxConnections && !waiting_.empty()) {
    auto call = std::move(waiting_.front());
    waiting_.pop_front();
    if (Clock::now() >= call->deadline) {
      call->log.record(call->member, Trouble::kUnresponsive,
                       "no connection free before the deadline");
      give_up(call);
      continue;
    }
    attempt(call);
  }
}

void EtcdClient::on_reply(const std::shared_ptr<Call>& call, std::size_t member,
                          HttpConnection& connection, HttpReply reply) {
  AttemptTrouble failed{Trouble::kUnreachable, reply.request_sent, reply.detail};
  switch (reply.failure) {
    case HttpFailure::kConnect:
    case HttpFailure::kTls:
      failed.maybe_applied = false;  // no connection, or a refused handshake: it never got in
      [[fallthrough]];
    case HttpFailure::kBroken:
    case HttpFailure::kTimeout:
    case HttpFailure::kProtocol:
      failed.trouble = transport_trouble(reply.failure);
      break;
    case HttpFailure::kNone: {
      auto judged = judge_answer(call, member, reply);
      if (!judged) {
        return;  // finished: served, or refused by etcd itself
      }
      failed = std::move(*judged);
      break;
    }
  }
  if (failed.trouble == Trouble::kProtocol) {
    connection.close();  // whatever else it sends is not to be trusted either
  }
  call->log.record(member, failed.trouble, failed.detail);
  member_failed(member);
  if (failed.maybe_applied && call->retry == Retry::kUnlessMaybeApplied) {
    auto failure = call->log.summary(
        operation_name(call->path),
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - call->started));
    failure.maybe_applied = true;
    finish(call, std::move(failure));
    return;
  }
  next_member(call);
}

std::optional<EtcdClient::AttemptTrouble> EtcdClient::judge_answer(
    const std::shared_ptr<Call>& call, std::size_t member, const HttpReply& reply) {
  nlohmann::json body;
  std::string parse_error;
  try {
    body = EtcdCodec::parse(reply.body, options_.limits.max_json_depth);
  } catch (const EtcdProtocolError& error) {
    parse_error = error.what();
  }
  if (parse_error.empty() && !body.is_object()) {
    parse_error = "the reply is JSON but not an object";
  }
  const bool stream_error = body.is_object() && body.contains("error") && body["error"].is_object();
  if (reply.status == kHttpOk && parse_error.empty() && !stream_error) {
    member_served(member);
    finish(call, std::move(body));
    return std::nullopt;
  }
  if (reply.status == kHttpOk && !parse_error.empty()) {
    return AttemptTrouble{Trouble::kProtocol, reply.request_sent, parse_error};
  }
  const ErrorReply error = EtcdCodec::decode_error(body);
  const std::string message =
      error.message.empty() ? "HTTP status " + std::to_string(reply.status) : error.message;
  if (reply.status == kHttpUnavailable || reply.status == kHttpInternalError ||
      error.code == kGrpcUnavailable) {
    // No quorum: refused outright ("no leader"), or proposed and timed out.
    return AttemptTrouble{Trouble::kNoLeader, !is_no_leader(message), message};
  }
  if (reply.status == kHttpTooManyRequests) {
    return AttemptTrouble{Trouble::kUnresponsive, false, message};
  }
  if (retry_with_fresh_token(call, error)) {
    member_served(member);
    return std::nullopt;
  }
  if (!error.message.empty()) {
    // etcd refused the request itself (lease not found, compacted, too large).
    EtcdFailure failure;
    failure.kind = round::KvErrorKind::kRejected;
    failure.code = error.code;
    failure.message = describe() + ": etcd rejected the " + operation_name(call->path) + " (HTTP " +
                      std::to_string(reply.status) + "): " + error.message;
    member_served(member);
    finish(call, std::move(failure));
    return std::nullopt;
  }
  return AttemptTrouble{Trouble::kProtocol, reply.request_sent,
                        "HTTP status " + std::to_string(reply.status) +
                            " without an etcd error body (is this an etcd v3 gateway?)"};
}

void EtcdClient::next_member(const std::shared_ptr<Call>& call) {
  if (!call->log.any_usable() || Clock::now() >= call->deadline) {
    give_up(call);
    return;
  }
  const std::size_t count = options_.endpoints.size();
  std::size_t next = call->member;
  do {
    next = (next + 1) % count;
  } while (!call->log.usable(next));
  call->member = next;
  if (call->tried % count != 0) {
    attempt(call);
    return;
  }
  // Every member failed once in this round: pause before the next round.
  const auto pause = std::min<Clock::duration>(call->backoff, call->deadline - Clock::now());
  call->backoff = std::min(call->backoff * 2, kMaxBackoff);
  call->backoff_timer.expires_after(pause);
  call->backoff_timer.async_wait(lifetime_.guard([this, call](const boost::system::error_code& ec) {
    if (ec || closed_) {
      return;
    }
    if (Clock::now() >= call->deadline) {
      give_up(call);
      return;
    }
    attempt(call);
  }));
}

void EtcdClient::give_up(const std::shared_ptr<Call>& call) {
  finish(call, call->log.summary(operation_name(call->path),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     Clock::now() - call->started)));
}

void EtcdClient::finish(const std::shared_ptr<Call>& call, Outcome outcome) {
  auto done = std::move(call->done);
  call->done = nullptr;
  if (done) {
    done(std::move(outcome));
  }
}

void EtcdClient::member_failed(std::size_t member) {
  if (preferred_ == member) {
    preferred_ = (member + 1) % options_.endpoints.size();
  }
}

std::shared_ptr<HttpConnection> EtcdClient::take_connection(std::size_t member) {
  auto& idle = idle_[member];
  while (!idle.empty()) {
    auto connection = std::move(idle.back());
    idle.pop_back();
    if (connection->reusable()) {
      return connection;
    }
  }
  return stream_connection(member);
}

void EtcdClient::keep_connection(std::size_t member, std::shared_ptr<HttpConnection> connection) {
  auto& idle = idle_[member];
  if (idle.size() < kMaxIdlePerMember && !closed_) {
    idle.push_back(std::move(connection));
  } else {
    connection->close();
  }
}

std::shared_ptr<HttpConnection> EtcdClient::stream_connection(std::size_t member) {
  auto connection =
      HttpConnection::create(io_, options_.endpoints.at(member), tls_, options_.limits);
  if (open_.size() >= 2 * kMaxConnections) {
    std::erase_if(open_, [](const auto& entry) { return entry.expired(); });
  }
  open_.push_back(connection);
  return connection;
}

void EtcdClient::close() {
  closed_ = true;
  waiting_.clear();
  for (auto& idle : idle_) {
    idle.clear();
  }
  for (const auto& entry : open_) {
    if (auto connection = entry.lock()) {
      connection->close();
    }
  }
  open_.clear();
}

}  // namespace ddprun::rendezvous::backends::etcd
