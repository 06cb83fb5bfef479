#include "rendezvous/backends/store_kv/store_kv_dialer.hpp"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "common/random.hpp"
#include "rendezvous/backends/store_kv/store_kv_requests.hpp"
#include "rendezvous/store/job_auth.hpp"

namespace ddprun::rendezvous::backends {
namespace {

using round::KvErrorKind;
using Outcome = StoreKvConnection::Outcome;
using Reply = StoreKvConnection::Reply;
using ReplyShape = StoreKvConnection::ReplyShape;
using Milliseconds = std::chrono::duration<double, std::milli>;

// Reconnect backoff: exponential with jitter in [0.5, 1.5] x the current step, like PyTorch's,
// with a shorter start (a store that restarts or starts late is usually up within moments).
constexpr auto kFirstBackoff = Milliseconds(20);
constexpr auto kMaxBackoff = Milliseconds(1000);
constexpr double kBackoffFactor = 1.5;
constexpr double kJitterLow = 0.5;
constexpr double kJitterHigh = 1.5;

// G2's openings as a G0 server reads them: opcode 0 is SET, and the next 8 bytes its key
// length, whose low four bytes are VALIDATE's magic and whose top three bytes come from what
// follows it. PING: the nonce's low three bytes, so bit 23 of the nonce makes the length at
// least 2^63. Without PING: three more GETNUMKEYS (opcode 7), making it at least 2^56.
constexpr uint32_t kNonceMask = 0x007FFFFFu;
constexpr uint32_t kNonceTopBit = 0x00800000u;
constexpr std::size_t kCountsInOpening = 4;

uint32_t make_nonce() {
  return (static_cast<uint32_t>(::getpid()) & kNonceMask) | kNonceTopBit;
}

}  // namespace

struct StoreKvDialer::Attempt {
  explicit Attempt(boost::asio::io_context& io) : backoff_timer(io) {}

  std::chrono::milliseconds budget{0};
  Clock::time_point deadline;
  Done done;
  boost::asio::steady_timer backoff_timer;
  Milliseconds backoff = kFirstBackoff;
  std::shared_ptr<StoreKvConnection> connection;
  // The opening to try next while the server's generation is unknown.
  Opening opening = Opening::g2_with_ping;
  bool abandoned = false;  // finished or abandoned: no callback runs any more
};

StoreKvDialer::StoreKvDialer(boost::asio::io_context& io, Settings settings)
    : io_(io), settings_(std::move(settings)), jitter_(std::random_device{}()) {}

StoreKvDialer::~StoreKvDialer() {
  abandon();
}

void StoreKvDialer::abandon() {
  for (const auto& attempt : attempts_) {
    attempt->abandoned = true;
    attempt->backoff_timer.cancel();
    if (attempt->connection) {
      attempt->connection->close();
    }
  }
  attempts_.clear();
}

void StoreKvDialer::dial(std::chrono::milliseconds budget, Done done) {
  auto attempt = std::make_shared<Attempt>(io_);
  attempt->budget = budget;
  attempt->deadline = Clock::now() + budget;
  attempt->done = std::move(done);
  attempts_.insert(attempt);
  boost::asio::post(io_, [this, attempt] {
    if (!attempt->abandoned) {
      try_connect(attempt);
    }
  });
}

std::optional<std::vector<boost::asio::ip::tcp::endpoint>> StoreKvDialer::resolve(
    std::string& error) {
  boost::system::error_code code;
  const auto address = boost::asio::ip::make_address(settings_.host, code);
  if (!code) {
    return std::vector{boost::asio::ip::tcp::endpoint(address, settings_.port)};
  }
  boost::asio::ip::tcp::resolver resolver(io_);
  const auto results = resolver.resolve(settings_.host, std::to_string(settings_.port), code);
  if (code) {
    error = "cannot resolve " + settings_.host + ": " + code.message();
    return std::nullopt;
  }
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
  for (const auto& entry : results) {
    endpoints.push_back(entry.endpoint());
  }
  return endpoints;
}

void StoreKvDialer::try_connect(const std::shared_ptr<Attempt>& attempt) {
  std::string error;
  const auto endpoints = resolve(error);
  if (!endpoints) {
    retry_later(attempt, error);
    return;
  }
  attempt->connection = std::make_shared<StoreKvConnection>(io_, settings_.limits);
  const auto connect_deadline =
      std::min(attempt->deadline, Clock::now() + settings_.limits.op_timeout);
  attempt->connection->connect(*endpoints, connect_deadline,
                               [this, attempt](std::optional<Failure> failure) {
                                 if (attempt->abandoned) {
                                   return;
                                 }
                                 if (failure) {
                                   attempt->connection.reset();
                                   retry_later(attempt, failure->reason);
                                   return;
                                 }
                                 handshake(attempt);
                               });
}

std::optional<store::WireGeneration> StoreKvDialer::generation() const {
  if (!opening_) {
    return std::nullopt;
  }
  return *opening_ == Opening::g0 ? store::WireGeneration::g0 : store::WireGeneration::g2;
}

void StoreKvDialer::handshake(const std::shared_ptr<Attempt>& attempt) {
  const Opening opening = opening_.value_or(attempt->opening);
  const StoreKvRequests requests(opening == Opening::g0 ? store::WireGeneration::g0
                                                        : store::WireGeneration::g2);
  // AUTH_HELLO leaves in the handshake's write: its challenge comes back behind the
  // handshake's reply, a round trip sooner. So on the first opening tried (ddprun's store,
  // the only one that takes a secret, speaks it) and once the generation is known; not on the
  // fallback openings: a store that knows no AUTH_HELLO (PyTorch's) may close the connection
  // at it before its handshake reply left, and one of them must succeed for this agent to be
  // told why (the store takes no secret) rather than that no opening worked.
  const bool hello_with_handshake =
      !settings_.secret.empty() && (opening_.has_value() || opening == Opening::g2_with_ping);
  auto on_reply = [this, attempt, opening, requests, hello_with_handshake](
                      Outcome& outcome, std::optional<uint32_t> nonce) {
    if (attempt->abandoned) {
      return;
    }
    if (const auto* failure = std::get_if<Failure>(&outcome)) {
      on_handshake_failed(attempt, *failure);
      return;
    }
    if (nonce && std::get<Reply>(outcome).echo != *nonce) {
      attempt->connection->close();
      finish(attempt, nullptr,
             Failure{KvErrorKind::kProtocol, "the server answered PING with a different nonce"});
      return;
    }
    opening_ = opening;
    attempt->connection->set_fence(requests.fence());
    if (settings_.secret.empty()) {
      // A store with a job secret closes an agent's connection at its first request when the
      // agent has no secret: the only thing this agent sees. Say what it may mean.
      attempt->connection->set_first_reply_hint(
          " at this agent's first request: the rendezvous may have a job secret, which this "
          "agent lacks (DDPRUN_RDZV_SECRET, DDPRUN_RDZV_SECRET_FILE or --rdzv_conf secret_file)");
      finish(attempt, attempt->connection, std::nullopt);
      return;
    }
    if (!hello_with_handshake) {
      ask_challenge(attempt);
    }
  };
  auto& connection = *attempt->connection;
  switch (opening) {
    case Opening::g2_with_ping: {
      const uint32_t nonce = make_nonce();
      connection.send(StoreKvRequests::validate_and_ping(nonce), ReplyShape::echo,
                      "the handshake (VALIDATE, PING)",
                      [on_reply, nonce](Outcome& outcome) { on_reply(outcome, nonce); });
      break;
    }
    case Opening::g2_without_ping:
      connection.send(StoreKvRequests::validate_and_count(kCountsInOpening), ReplyShape::integer,
                      "the handshake (VALIDATE, GETNUMKEYS)", [](Outcome&) {});
      for (std::size_t i = 1; i < kCountsInOpening; ++i) {
        // The last count's handler speaks for all four.
        connection.send(
            "", ReplyShape::integer, "the handshake (GETNUMKEYS)",
            i + 1 < kCountsInOpening
                ? StoreKvConnection::ReplyHandler([](Outcome&) {})
                : [on_reply](Outcome& outcome) { on_reply(outcome, std::nullopt); });
      }
      break;
    case Opening::g0:
      connection.send(requests.fence(), ReplyShape::check, "the handshake (CHECK)",
                      [on_reply](Outcome& outcome) { on_reply(outcome, std::nullopt); });
      break;
  }
  if (hello_with_handshake) {
    ask_challenge(attempt);
  }
}

void StoreKvDialer::ask_challenge(const std::shared_ptr<Attempt>& attempt) {
  // A store that closes the connection at AUTH_HELLO does not know the extension: PyTorch's own.
  const auto refusal = [](const Failure& failure) {
    return failure.kind == KvErrorKind::kUnreachable
               ? Failure{KvErrorKind::kRejected,
                         "the store " + std::string(store::kStoreClosedAtHello)}
               : failure;
  };
  std::string nonce = common::random_bytes(store::kAuthNonceBytes);  // fresh per connection
  std::string hello = store::auth_hello_request(nonce);
  auto on_challenge = [this, attempt, refusal, asked_on = attempt->connection.get(),
                       nonce = std::move(nonce)](Outcome& outcome) {
    // A handshake in front of the HELLO that failed has dealt with the connection already.
    if (attempt->abandoned || attempt->connection.get() != asked_on) {
      return;
    }
    if (const auto* failure = std::get_if<Failure>(&outcome)) {
      finish(attempt, nullptr, refusal(*failure));
      return;
    }
    const auto& reply = std::get<Reply>(outcome);
    const auto answer = store::answer_store_challenge(
        settings_.secret, nonce, reply.ready ? store::kAuthChallenge : store::kAuthNotRequired,
        reply.value);
    if (answer.refusal) {
      // Nothing this store says is believed: no request goes to it.
      attempt->connection->close();
      finish(attempt, nullptr,
             Failure{KvErrorKind::kRejected, "the store " + std::string(*answer.refusal)});
      return;
    }
    // The connection goes to its owner with the proof on its way, so that the owner's first
    // request leaves in the proof's write; the server weighs the proof before it reads it.
    send_proof(*attempt->connection, answer.proof_request);
    finish(attempt, attempt->connection, std::nullopt);
  };
  attempt->connection->send(hello, ReplyShape::auth_challenge, "AUTH_HELLO", on_challenge);
}

void StoreKvDialer::send_proof(StoreKvConnection& connection,
                               const std::string& proof_request) const {
  // Runs after the dial finished, for whoever then holds the connection: a refusal fails the
  // requests queued behind the proof (the server closes the connection before serving them).
  auto on_verdict = [weak = connection.weak_from_this()](Outcome& outcome) {
    const auto* reply = std::get_if<Reply>(&outcome);
    const auto held = weak.lock();
    if (reply != nullptr && !reply->ready && held) {
      held->abort(
          Failure{KvErrorKind::kRejected, "the store refused this agent: wrong job secret"});
    }
  };
  connection.send(proof_request, ReplyShape::auth_verdict, "AUTH_PROOF", on_verdict);
}

void StoreKvDialer::on_handshake_failed(const std::shared_ptr<Attempt>& attempt,
                                        const Failure& failure) {
  attempt->connection.reset();  // already closed by its failure
  if (!opening_) {
    const bool dropped = failure.kind == KvErrorKind::kUnreachable;
    if (attempt->opening == Opening::g2_with_ping && !dropped) {
      // It took the connection but neither answered nor dropped it: a hung server.
      finish(attempt, nullptr,
             Failure{failure.kind, "the server accepted the connection, then: " + failure.reason});
      return;
    }
    if (attempt->opening != Opening::g0) {
      // Dropped: perhaps an older server. Try the next opening at once.
      attempt->opening =
          attempt->opening == Opening::g2_with_ping ? Opening::g2_without_ping : Opening::g0;
      try_connect(attempt);
      return;
    }
    // No opening worked (a server going down drops every one): start over after the backoff.
    attempt->opening = Opening::g2_with_ping;
    retry_later(attempt, failure.reason);
    return;
  }
  if (failure.kind == KvErrorKind::kUnreachable) {
    retry_later(attempt, failure.reason);
    return;
  }
  finish(attempt, nullptr,
         Failure{failure.kind, "the server accepted the connection, then: " + failure.reason});
}

void StoreKvDialer::retry_later(const std::shared_ptr<Attempt>& attempt, const std::string& error) {
  std::uniform_real_distribution<double> spread(kJitterLow, kJitterHigh);
  const auto delay =
      std::chrono::duration_cast<std::chrono::milliseconds>(attempt->backoff * spread(jitter_));
  if (Clock::now() + delay >= attempt->deadline) {
    finish(attempt, nullptr,
           Failure{KvErrorKind::kUnreachable, "no connection within " +
                                                  std::to_string(attempt->budget.count()) +
                                                  " ms: " + error});
    return;
  }
  attempt->backoff = std::min(attempt->backoff * kBackoffFactor, kMaxBackoff);
  attempt->backoff_timer.expires_after(delay);
  attempt->backoff_timer.async_wait([this, attempt](const boost::system::error_code& code) {
    if (!code && !attempt->abandoned) {
      try_connect(attempt);
    }
  });
}

void StoreKvDialer::finish(const std::shared_ptr<Attempt>& attempt,
                           std::shared_ptr<StoreKvConnection> connection,
                           std::optional<Failure> failure) {
  const auto keep_alive = attempt;
  attempts_.erase(attempt);
  attempt->abandoned = true;
  attempt->connection.reset();
  auto done = std::move(attempt->done);
  done(std::move(connection), std::move(failure));
}

}  // namespace ddprun::rendezvous::backends
