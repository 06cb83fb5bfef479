// StoreKv with a job secret costs no round trip of its own: through a relay that passes the
// store's replies on only when the test says so, a fresh connection is seen sending AUTH_HELLO
// with its handshake, and its first request right behind AUTH_PROOF, each before any reply to
// them reached the client. A wrong secret: the store's proof does not check out, the agent
// sends nothing more, and the op fails kRejected ("does not know the job secret").
// Real sockets on loopback, ddprun's store in-process, one event loop; every wait is bounded.

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/backends/store_kv/store_kv.hpp"
#include "rendezvous/backends/store_kv/store_kv_requests.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/store_server.hpp"
#include "store_kv_testing.hpp"

using namespace std::chrono_literals;
namespace kv = ddprun::rendezvous::round;
namespace store = ddprun::rendezvous::store;
using boost::asio::ip::tcp;
using ddprun::rendezvous::backends::StoreKv;
using ddprun::rendezvous::backends::StoreKvOptions;
using ddprun::rendezvous::backends::StoreKvRequests;
using Clock = std::chrono::steady_clock;
using ddprun::rendezvous::testing::Loop;
using ddprun::rendezvous::testing::options_for;

namespace {

const std::string kSecret = "store-kv-pipelining-test-secret";
const std::string kValidate("\x00\xce\xf7\x85\x3c", 5);
constexpr std::size_t kPingBytes = 5;  // opcode, u32 nonce
constexpr std::size_t kChallengeBytes = store::kAuthChallengeBytes;
// AUTH_HELLO: its opcode, the version, the agent's nonce (random, so only its shape is known).
const std::string kHelloStart{static_cast<char>(store::kAuthHelloOpcode),
                              static_cast<char>(store::kAuthVersion)};
constexpr std::size_t kHelloBytes = 2 + store::kAuthNonceBytes;
constexpr std::size_t kProofBytes = 1 + store::kAuthProofBytes;

// A TCP relay on the test's loop between a client and the store. It records what each
// connection's client sent and passes it on at once; what the store answers is recorded and,
// on connections accepted while replies are held, passed on only by release().
class GatedRelay {
 public:
  GatedRelay(boost::asio::io_context& io, uint16_t store_port)
      : io_(io),
        acceptor_(io, tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0)),
        store_port_(store_port) {
    accept();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  // For connections accepted from now on.
  void hold_replies(bool hold) { hold_replies_ = hold; }
  std::size_t connections() const { return links_.size(); }
  // What the client of connection `i` sent so far.
  const std::string& sent(std::size_t i) const { return links_.at(i)->sent; }
  // What the store answered on connection `i` so far, passed on or not.
  const std::string& answered(std::size_t i) const { return links_.at(i)->answered; }
  bool store_closed(std::size_t i) const { return links_.at(i)->store_closed; }

  // Passes on what the store answered on connection `i` and the client has not had yet, and
  // the store's close when it closed.
  void release(std::size_t i) {
    Link& link = *links_.at(i);
    boost::asio::write(link.client, boost::asio::buffer(link.answered.substr(link.passed_on)));
    link.passed_on = link.answered.size();
    if (link.store_closed) {
      boost::system::error_code ignored;
      link.client.shutdown(tcp::socket::shutdown_send, ignored);
    }
  }

 private:
  struct Link {
    explicit Link(boost::asio::io_context& io) : client(io), store(io) {}
    tcp::socket client;
    tcp::socket store;
    bool hold = false;
    std::string sent;
    std::string answered;
    std::size_t passed_on = 0;
    bool store_closed = false;
    std::array<char, 4096> from_client{};
    std::array<char, 4096> from_store{};
  };
  using LinkPtr = std::shared_ptr<Link>;

  void accept() {
    auto link = std::make_shared<Link>(io_);
    acceptor_.async_accept(link->client, [this, link](const boost::system::error_code& error) {
      if (error) {
        return;
      }
      link->hold = hold_replies_;
      link->store.connect(tcp::endpoint(boost::asio::ip::address_v4::loopback(), store_port_));
      links_.push_back(link);
      read_client(link);
      read_store(link);
      accept();
    });
  }

  static void read_client(const LinkPtr& link) {
    link->client.async_read_some(
        boost::asio::buffer(link->from_client),
        [link](const boost::system::error_code& error, std::size_t received) {
          if (error) {
            boost::system::error_code ignored;
            link->store.shutdown(tcp::socket::shutdown_send, ignored);
            return;
          }
          link->sent.append(link->from_client.data(), received);
          boost::system::error_code broken;  // the store closed: the client hears of it
          boost::asio::write(link->store, boost::asio::buffer(link->from_client.data(), received),
                             broken);
          read_client(link);
        });
  }

  static void read_store(const LinkPtr& link) {
    link->store.async_read_some(
        boost::asio::buffer(link->from_store),
        [link](const boost::system::error_code& error, std::size_t received) {
          if (error) {
            link->store_closed = true;
          } else {
            link->answered.append(link->from_store.data(), received);
          }
          if (!link->hold) {
            boost::system::error_code ignored;
            boost::asio::write(
                link->client, boost::asio::buffer(link->answered.substr(link->passed_on)), ignored);
            link->passed_on = link->answered.size();
            if (link->store_closed) {
              link->client.shutdown(tcp::socket::shutdown_send, ignored);
            }
          }
          if (!error) {
            read_store(link);
          }
        });
  }

  boost::asio::io_context& io_;
  tcp::acceptor acceptor_;
  uint16_t store_port_;
  bool hold_replies_ = false;
  std::vector<LinkPtr> links_;
};

std::unique_ptr<store::StoreServer> start_server() {
  store::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.log_level = store::StoreLogLevel::quiet;
  options.secret = kSecret;
  return store::StoreServer::start(options);
}

// Runs one op to its end on the loop.
kv::KvResult call(Loop& loop, StoreKv& client, kv::KvOp op) {
  std::optional<kv::KvResult> result;
  client.start(1, std::move(op), [&result](kv::KvResult done) { result = std::move(done); });
  REQUIRE(loop.run_until([&] { return result.has_value(); }));
  return *result;
}

std::string describe(const kv::KvResult& result) {
  if (const auto* error = std::get_if<kv::KvError>(&result)) {
    return ddprun::rendezvous::backends::to_string(error->kind) + ": " + error->message;
  }
  return "an answer of kind " + std::to_string(result.index());
}

}  // namespace

TEST_CASE("a fresh connection proves the secret without a round trip of its own",
          "[store_kv][job_secret]") {
  Loop loop;
  const auto server = start_server();
  GatedRelay relay(loop.io, server->port());
  StoreKv client(loop.io, options_for(relay.port(), kSecret));
  // The first connection (replies flow freely) tells the dialer the server's generation.
  const auto added = call(loop, client, kv::KvAdd{"ddprun/rdzv/job/ready", 1});
  INFO(describe(added));
  REQUIRE(std::holds_alternative<kv::KvCounter>(added));
  REQUIRE(relay.connections() == 1);

  // A wait takes a connection of its own: a fresh one, whose replies the relay now holds.
  relay.hold_replies(true);
  std::optional<kv::KvResult> waited;
  client.start(2, kv::KvWait{{"ddprun/rdzv/job/ready"}, 20s},
               [&waited](kv::KvResult done) { waited = std::move(done); });
  const std::size_t opening_bytes = kValidate.size() + kPingBytes + kHelloBytes;
  REQUIRE(loop.run_until([&] {
    return relay.connections() == 2 && relay.sent(1).size() >= opening_bytes &&
           relay.answered(1).size() >= 4 + kChallengeBytes;
  }));
  // Handshake and AUTH_HELLO went out before the client had any reply; the store answered both.
  CHECK(relay.sent(1).substr(0, kValidate.size()) == kValidate);
  CHECK(relay.sent(1).substr(kValidate.size() + kPingBytes, 2) == kHelloStart);
  CHECK(relay.sent(1).size() == opening_bytes);
  CHECK(relay.answered(1)[4] == static_cast<char>(store::kAuthChallenge));

  relay.release(1);
  const std::string wait_request =
      StoreKvRequests(store::WireGeneration::g2).wait({"ddprun/rdzv/job/ready"});
  // The store's verdict (ACCEPTED) and its answer to the WAIT (STOP_WAITING): the WAIT left
  // before the client had the verdict, and was served on the strength of the proof before it.
  REQUIRE(loop.run_until([&] {
    return relay.sent(1).size() >= opening_bytes + kProofBytes + wait_request.size() &&
           relay.answered(1).size() >= 4 + kChallengeBytes + 2;
  }));
  CHECK(waited == std::nullopt);
  CHECK(relay.sent(1).substr(opening_bytes, 1) ==
        std::string(1, static_cast<char>(store::kAuthProofOpcode)));
  CHECK(relay.sent(1).substr(opening_bytes + kProofBytes) == wait_request);
  CHECK(
      relay.answered(1).substr(4 + kChallengeBytes) ==
      std::string{static_cast<char>(store::kAuthAccepted), static_cast<char>(store::kStopWaiting)});

  relay.release(1);
  REQUIRE(loop.run_until([&] { return waited.has_value(); }));
  INFO(describe(*waited));
  REQUIRE(std::holds_alternative<kv::KvReady>(*waited));
  CHECK(std::get<kv::KvReady>(*waited).ready);
}

TEST_CASE("a wrong secret: the agent does not believe the store, and sends it nothing more",
          "[store_kv][job_secret]") {
  Loop loop;
  const auto server = start_server();
  StoreKv agent(loop.io, options_for(server->port(), kSecret));
  REQUIRE(std::holds_alternative<kv::KvDone>(
      call(loop, agent, kv::KvSet{"ddprun/rdzv/job/round", "1"})));

  GatedRelay relay(loop.io, server->port());
  relay.hold_replies(true);
  StoreKv intruder(loop.io, options_for(relay.port(), "not-the-secret-0123"));
  std::optional<kv::KvResult> refused;
  intruder.start(1, kv::KvSet{"ddprun/rdzv/job/round", "junk"},
                 [&refused](kv::KvResult done) { refused = std::move(done); });
  // The first connection too sends AUTH_HELLO with its handshake (the opening ddprun's store
  // speaks), before any reply.
  const std::size_t opening_bytes = kValidate.size() + kPingBytes + kHelloBytes;
  REQUIRE(loop.run_until(
      [&] { return relay.connections() == 1 && relay.answered(0).size() >= 4 + kChallengeBytes; }));
  CHECK(relay.sent(0).substr(kValidate.size() + kPingBytes, 2) == kHelloStart);
  relay.release(0);
  // The store's proof is over the job's secret, not the intruder's: the intruder takes it for
  // an impostor, closes, and neither proves anything nor sends its SET.
  REQUIRE(loop.run_until([&] { return refused.has_value(); }));
  INFO(describe(*refused));
  REQUIRE(std::holds_alternative<kv::KvError>(*refused));
  const auto& error = std::get<kv::KvError>(*refused);
  CHECK(error.kind == kv::KvErrorKind::kRejected);
  CHECK(error.message.find("does not know the job secret") != std::string::npos);
  CHECK(relay.sent(0).size() == opening_bytes);
  const auto round = call(loop, agent, kv::KvGet{"ddprun/rdzv/job/round"});
  REQUIRE(std::holds_alternative<kv::KvValue>(round));
  CHECK(std::get<kv::KvValue>(round).value == std::optional<std::string>("1"));
}
