// StoreKv, the KvBackend over a TCPStore-protocol server, against real servers: ours (in-process
// StoreServer, and the ddprun-store daemon where a test stops or kills it), PyTorch 1.13's
// (Debian's python3: the G0 fallback) and PyTorch 2.x's legacy and libuv servers (G2, from the
// venv at .venv or $DDPRUN_TORCH2_PYTHON; skipped with a warning when there is none), and small
// misbehaving servers made here (one that never answers, one that sends a huge length).
// Every wait is bounded by the loop's deadline; nothing sleeps.

#include "rendezvous/backends/store_kv/store_kv.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "raw_connection.hpp"
#include "rendezvous/store/store_server.hpp"
#include "rendezvous/store/wire_codec.hpp"
#include "store_kv_testing.hpp"

using namespace std::chrono_literals;
namespace kv = ddprun::rendezvous::round;
using ddprun::rendezvous::backends::StoreKv;
using ddprun::rendezvous::backends::StoreKvOptions;
using ddprun::rendezvous::store::StoreServer;
using ddprun::rendezvous::store::StoreServerOptions;
using ddprun::rendezvous::store::WireGeneration;
using ddprun::rendezvous::store::testing::ChildProcess;
using ddprun::rendezvous::store::testing::StoreDaemon;
using Clock = std::chrono::steady_clock;
using ddprun::rendezvous::testing::Loop;
using ddprun::rendezvous::testing::options_for;
using Value = std::optional<std::string>;

namespace {

const std::string kScripts = std::string(DDPRUN_SOURCE_DIR) + "/tests/rendezvous/python/";

using Slot = std::shared_ptr<std::optional<kv::KvResult>>;

class Client {
 public:
  Client(Loop& loop, StoreKvOptions options) : loop_(loop), kv_(loop.io, std::move(options)) {}

  // Starts op; the slot fills in when it completes.
  Slot start(kv::KvOp op, uint64_t* id = nullptr) {
    auto slot = std::make_shared<std::optional<kv::KvResult>>();
    const uint64_t op_id = next_id_++;
    if (id != nullptr) {
      *id = op_id;
    }
    kv_.start(op_id, std::move(op), [slot](kv::KvResult result) { *slot = std::move(result); });
    return slot;
  }

  kv::KvResult call(kv::KvOp op) {
    const Slot slot = start(std::move(op));
    REQUIRE(loop_.run_until([&] { return slot->has_value(); }));
    return **slot;
  }

  StoreKv& kv() { return kv_; }

 private:
  Loop& loop_;
  StoreKv kv_;
  uint64_t next_id_ = 1;
};

std::string describe(const kv::KvResult& result) {
  if (const auto* error = std::get_if<kv::KvError>(&result)) {
    return ddprun::rendezvous::backends::to_string(error->kind) + ": " + error->message;
  }
  return "an answer of kind " + std::to_string(result.index());
}

template <typename T>
T expect(const kv::KvResult& result) {
  INFO(describe(result));
  REQUIRE(std::holds_alternative<T>(result));
  return std::get<T>(result);
}

kv::KvError expect_error(const kv::KvResult& result, kv::KvErrorKind kind) {
  INFO(describe(result));
  REQUIRE(std::holds_alternative<kv::KvError>(result));
  const auto error = std::get<kv::KvError>(result);
  CHECK(error.kind == kind);
  return error;
}

std::unique_ptr<StoreServer> start_server(uint16_t port = 0) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  return StoreServer::start(options);
}

// Blocks until the child stopped (SIGSTOP is delivered asynchronously).
void await_stopped(pid_t pid) {
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &info, WSTOPPED | WNOWAIT) == 0);
}

// Every op, answered as kv_ops.hpp says, by the server at `port`.
void exercise_every_op(uint16_t port, WireGeneration generation) {
  Loop loop;
  Client client(loop, options_for(port));
  const auto get = [&](const std::string& key) {
    return expect<kv::KvValue>(client.call(kv::KvGet{key})).value;
  };
  const auto values = [&](const std::vector<std::string>& keys) {
    return expect<kv::KvValues>(client.call(kv::KvMultiGet{keys})).values;
  };
  const auto set = [&](const std::string& key, const std::string& value) {
    expect<kv::KvDone>(client.call(kv::KvSet{key, value}));
  };
  const auto add = [&](const std::string& key, int64_t delta) {
    return expect<kv::KvCounter>(client.call(kv::KvAdd{key, delta})).value;
  };
  const auto swap = [&](const std::string& key, Value expected, const std::string& desired) {
    return expect<kv::KvValue>(client.call(kv::KvCompareSet{key, std::move(expected), desired}))
        .value;
  };
  const auto ready = [&](std::vector<std::string> keys, std::chrono::milliseconds timeout) {
    return expect<kv::KvReady>(client.call(kv::KvWait{std::move(keys), timeout})).ready;
  };

  // A read never blocks, and tells an absent key from an empty value.
  CHECK(get("absent") == Value{});
  CHECK(client.kv().generation() == generation);
  set("k", "v1");
  set("empty", "");
  CHECK(get("k") == Value{"v1"});
  CHECK(get("empty") == Value{""});
  const std::string binary_key("b\0k", 3);
  const std::string binary_value("\0\xff\n", 3);
  set(binary_key, binary_value);
  CHECK(get(binary_key) == Value{binary_value});

  CHECK(values({"k", "absent", "empty"}) == std::vector<Value>{"v1", std::nullopt, ""});
  CHECK(values({"k", "empty"}) == std::vector<Value>{"v1", ""});
  CHECK(values({"absent"}) == std::vector<Value>{std::nullopt});
  CHECK(values({}).empty());

  expect<kv::KvDone>(client.call(kv::KvMultiSet{{"m1", "m2"}, {"x", "y"}}));
  CHECK(values({"m1", "m2"}) == std::vector<Value>{"x", "y"});
  expect_error(client.call(kv::KvMultiSet{{"m1", "m2"}, {"x"}}), kv::KvErrorKind::kRejected);

  CHECK(add("counter", 5) == 5);
  CHECK(add("counter", -2) == 3);
  CHECK(get("counter") == Value{"3"});

  CHECK(swap("cas", std::nullopt, "first") == Value{"first"});   // absent: created
  CHECK(swap("cas", std::nullopt, "second") == Value{"first"});  // present: kept
  CHECK(swap("cas", "first", "second") == Value{"second"});
  CHECK(swap("cas", "wrong", "third") == Value{"second"});
  CHECK(swap("cas-absent", "Y", "Z") == Value{});  // absent and expected: not created
  CHECK(get("cas-absent") == Value{});
  CHECK(swap("cas", "second", "second") == Value{"second"});
  CHECK(swap("cas-absent", "Y", "Y") == Value{});

  expect<kv::KvDone>(client.call(kv::KvAppend{"log", "a"}));
  expect<kv::KvDone>(client.call(kv::KvAppend{"log", "bc"}));
  CHECK(get("log") == Value{"abc"});
  expect<kv::KvDone>(client.call(kv::KvAppend{"k", "+"}));
  CHECK(get("k") == Value{"v1+"});

  // A peer that never beat reads as a counter that does not move; beats move it.
  CHECK(expect<kv::KvLiveness>(client.call(kv::KvProbe{"beat"})).counter == 0);
  expect<kv::KvDone>(client.call(kv::KvBeat{"beat"}));
  expect<kv::KvDone>(client.call(kv::KvBeat{"beat"}));
  const auto liveness = expect<kv::KvLiveness>(client.call(kv::KvProbe{"beat"}));
  CHECK(liveness.counter == 2);
  CHECK_FALSE(liveness.gone);

  CHECK(ready({"k", "empty"}, 10s));
  CHECK_FALSE(ready({"never"}, 100ms));
  CHECK(ready({"k"}, 0ms));  // no time left: whether the keys exist now
  CHECK_FALSE(ready({"never"}, 0ms));

  // A wait ends when another op creates its last key.
  const Slot late = client.start(kv::KvWait{{"late", "k"}, 60s});
  CHECK(get("late") == Value{});
  CHECK_FALSE(late->has_value());  // it cannot be ready while "late" is absent
  set("late", "now");
  REQUIRE(loop.run_until([&] { return late->has_value(); }));
  CHECK(expect<kv::KvReady>(**late).ready);

  // A cancelled wait never completes; the next waits are served as usual.
  uint64_t cancelled_id = 0;
  const Slot cancelled = client.start(kv::KvWait{{"never2"}, 60s}, &cancelled_id);
  client.kv().cancel(cancelled_id);
  client.kv().cancel(987654);  // unknown: ignored
  set("never2", "set");
  CHECK(ready({"never2"}, 10s));
  CHECK(ready({"never2", "k"}, 10s));
  CHECK_FALSE(cancelled->has_value());

  // close() lets started ops finish; later ops fail.
  const Slot last = client.start(kv::KvAdd{"counter", 1});
  bool closed = false;
  client.kv().close([&] { closed = true; });
  CHECK_FALSE(closed);
  REQUIRE(loop.run_until([&] { return closed; }));
  CHECK(expect<kv::KvCounter>(**last).value == 4);
  expect_error(client.call(kv::KvGet{"k"}), kv::KvErrorKind::kUnreachable);
}

// PyTorch TCPStore servers in a Python process (tcpstore_server.py): backend name -> port.
struct PythonStores {
  explicit PythonStores(const std::string& python)
      : process({python, kScripts + "tcpstore_server.py"}) {
    while (const auto line = process.read_line(120s)) {
      if (*line == "ready") {
        return;
      }
      const auto space = line->find(' ');
      REQUIRE(space != std::string::npos);
      ports[line->substr(0, space)] = static_cast<uint16_t>(std::stoi(line->substr(space + 1)));
    }
    FAIL(python << " did not start its TCPStore servers");
  }
  ChildProcess process;
  std::map<std::string, uint16_t> ports;
};

// A Python with PyTorch 2.x: $DDPRUN_TORCH2_PYTHON, else the repository's .venv.
std::optional<std::string> torch2_python() {
  if (const char* path = std::getenv("DDPRUN_TORCH2_PYTHON"); path != nullptr && *path != '\0') {
    return std::string(path);
  }
  const std::string venv = std::string(DDPRUN_SOURCE_DIR) + "/.venv/bin/python";
  if (::access(venv.c_str(), X_OK) == 0) {
    return venv;
  }
  return std::nullopt;
}

// The misbehaving servers below: each listens on 127.0.0.1 at a port the kernel picks.
class LoopbackServer {
 public:
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 protected:
  explicit LoopbackServer(boost::asio::io_context& io)
      : acceptor_(io, {boost::asio::ip::make_address("127.0.0.1"), 0}) {}
  boost::asio::ip::tcp::acceptor& acceptor() { return acceptor_; }

 private:
  boost::asio::ip::tcp::acceptor acceptor_;
};

// Accepts connections and never reads from them: a store that hangs.
class SilentServer : public LoopbackServer {
 public:
  explicit SilentServer(boost::asio::io_context& io) : LoopbackServer(io) { accept(); }

 private:
  void accept() {
    acceptor().async_accept(
        [this](const boost::system::error_code& error, boost::asio::ip::tcp::socket socket) {
          if (error) {
            return;
          }
          sockets_.push_back(std::move(socket));
          accept();
        });
  }
  std::vector<boost::asio::ip::tcp::socket> sockets_;
};

// Completes G2's handshake, then answers the next request with a value length of `length`
// bytes and nothing more.
class HugeLengthServer : public LoopbackServer {
 public:
  HugeLengthServer(boost::asio::io_context& io, uint64_t length) : LoopbackServer(io), socket_(io) {
    ddprun::rendezvous::wire::append_u64(reply_, length);
    acceptor().async_accept(socket_, [this](const boost::system::error_code& error) {
      if (!error) {
        read_handshake();
      }
    });
  }

 private:
  static constexpr std::size_t kHandshakeBytes = 10;  // VALIDATE (5), PING (1 + 4)
  static constexpr std::size_t kNonceOffset = 6;
  static constexpr std::size_t kNonceBytes = 4;

  void read_handshake() {
    boost::asio::async_read(
        socket_, boost::asio::buffer(handshake_, kHandshakeBytes),
        [this](const boost::system::error_code& error, std::size_t) {
          if (error) {
            return;
          }
          boost::asio::write(socket_, boost::asio::buffer(handshake_ + kNonceOffset, kNonceBytes));
          read_request();
        });
  }
  void read_request() {
    socket_.async_read_some(boost::asio::buffer(request_),
                            [this](const boost::system::error_code& error, std::size_t) {
                              if (!error) {
                                boost::asio::write(socket_, boost::asio::buffer(reply_));
                              }
                            });
  }

  boost::asio::ip::tcp::socket socket_;
  char handshake_[kHandshakeBytes] = {};
  char request_[4096] = {};
  std::string reply_;
};

// PyTorch 2.2 to 2.4's server as far as the opening goes: it speaks G2 but has no PING, so it
// drops a connection that sends one; it answers VALIDATE's GETNUMKEYS, then every later read
// (one ADD) with 42.
class ServerWithoutPing : public LoopbackServer {
 public:
  explicit ServerWithoutPing(boost::asio::io_context& io) : LoopbackServer(io) { accept(); }
  int connections() const { return connections_; }

 private:
  static constexpr std::size_t kValidateBytes = 5;
  static constexpr std::size_t kOpeningBytes = kValidateBytes + 4;  // + 4 x GETNUMKEYS
  static constexpr char kPing = 13;
  struct Session {
    explicit Session(boost::asio::ip::tcp::socket s) : socket(std::move(s)) {}
    boost::asio::ip::tcp::socket socket;
    std::array<char, 4096> chunk{};
    std::string input;
    bool opened = false;
  };

  void accept() {
    acceptor().async_accept(
        [this](const boost::system::error_code& error, boost::asio::ip::tcp::socket socket) {
          if (error) {
            return;
          }
          ++connections_;
          read(std::make_shared<Session>(std::move(socket)));
          accept();
        });
  }
  void read(const std::shared_ptr<Session>& session) {
    session->socket.async_read_some(
        boost::asio::buffer(session->chunk),
        [this, session](const boost::system::error_code& error, std::size_t received) {
          if (error) {
            return;
          }
          session->input.append(session->chunk.data(), received);
          if (!session->opened) {
            if (session->input.size() > kValidateBytes && session->input[kValidateBytes] == kPing) {
              return;  // the session, and its socket, end here
            }
            if (session->input.size() >= kOpeningBytes) {
              session->opened = true;
              session->input.erase(0, kOpeningBytes);
              boost::asio::write(session->socket, boost::asio::buffer(std::string(4 * 8, '\0')));
            }
          }
          if (session->opened && !session->input.empty()) {
            session->input.clear();
            std::string answer;
            ddprun::rendezvous::wire::append_i64(answer, 42);
            boost::asio::write(session->socket, boost::asio::buffer(answer));
          }
          read(session);
        });
  }

  int connections_ = 0;
};

long max_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

uint16_t unused_port(boost::asio::io_context& io) {
  boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return probe.local_endpoint().port();
}

}  // namespace

TEST_CASE("every op against ddprun's store (G2)", "[store_kv]") {
  const auto server = start_server();
  exercise_every_op(server->port(), WireGeneration::g2);
}

TEST_CASE("every op against PyTorch 1.13's TCPStore: the G0 fallback", "[store_kv]") {
  PythonStores stores("/usr/bin/python3");
  REQUIRE(stores.ports.count("legacy") == 1);
  exercise_every_op(stores.ports["legacy"], WireGeneration::g0);
}

TEST_CASE("every op against PyTorch 2.x's TCPStore servers (G2)", "[store_kv]") {
  const auto python = torch2_python();
  if (!python) {
    // CI always installs PyTorch 2.x: without it this test fails rather than pass untested.
    FAIL(
        "no PyTorch 2.x Python (neither $DDPRUN_TORCH2_PYTHON nor "
        ".venv/bin/python; scripts/install-deps.sh makes the venv)");
  }
  PythonStores stores(*python);
  REQUIRE(stores.ports.count("libuv") == 1);
  for (const auto& [backend, port] : stores.ports) {
    INFO("PyTorch's " << backend << " server");
    exercise_every_op(port, WireGeneration::g2);
  }
}

// PyTorch's own stores know no AUTH_HELLO: an agent with a job secret is refused at once, with
// the likely cause named, whichever generation the store speaks.
void expect_secret_not_taken(uint16_t port) {
  Loop loop;
  auto options = options_for(port);
  options.secret = "a-job-secret-0123456";
  Client client(loop, options);
  const auto error =
      expect_error(client.call(kv::KvAdd{"ddprun/rdzv/job/n", 1}), kv::KvErrorKind::kRejected);
  CHECK(error.message.find("does not know the job secret") != std::string::npos);
  CHECK(error.message.find("PyTorch's own TCPStore") != std::string::npos);
}

TEST_CASE("a job secret against PyTorch's own stores: refused, naming them", "[store_kv]") {
  {
    PythonStores stores("/usr/bin/python3");
    REQUIRE(stores.ports.count("legacy") == 1);
    expect_secret_not_taken(stores.ports["legacy"]);
  }
  const auto python = torch2_python();
  if (!python) {
    FAIL("no PyTorch 2.x Python (neither $DDPRUN_TORCH2_PYTHON nor .venv/bin/python)");
  }
  PythonStores stores(*python);
  REQUIRE(stores.ports.count("libuv") == 1);
  for (const auto& [backend, port] : stores.ports) {
    INFO("PyTorch's " << backend << " server");
    expect_secret_not_taken(port);
  }
}

TEST_CASE("a G2 server without PING (PyTorch 2.2 to 2.4) gets the opening without it",
          "[store_kv]") {
  Loop loop;
  ServerWithoutPing server(loop.io);
  Client client(loop, options_for(server.port()));
  CHECK(expect<kv::KvCounter>(client.call(kv::KvAdd{"counter", 1})).value == 42);
  CHECK(client.kv().generation() == WireGeneration::g2);
  CHECK(server.connections() == 2);
}

TEST_CASE("key_prefix goes in front of every key on the wire", "[store_kv]") {
  const auto server = start_server();
  Loop loop;
  auto options = options_for(server->port());
  options.key_prefix = "/run1/";
  Client prefixed(loop, options);
  Client plain(loop, options_for(server->port()));
  expect<kv::KvDone>(prefixed.call(kv::KvMultiSet{{"a", "b"}, {"1", "2"}}));
  CHECK(expect<kv::KvCounter>(prefixed.call(kv::KvAdd{"c", 3})).value == 3);
  CHECK(expect<kv::KvValues>(plain.call(kv::KvMultiGet{{"/run1/a", "/run1/b", "/run1/c", "a"}}))
            .values == std::vector<Value>{"1", "2", "3", std::nullopt});
  CHECK(expect<kv::KvReady>(prefixed.call(kv::KvWait{{"a", "c"}, 10s})).ready);
}

TEST_CASE("10,000 adds in flight at once, answered in order on one connection", "[store_kv]") {
  const auto server = start_server();
  Loop loop;
  Client client(loop, options_for(server->port()));
  constexpr int64_t kAdds = 10000;
  std::vector<int64_t> answers;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < kAdds; ++i) {
    client.kv().start(static_cast<uint64_t>(i), kv::KvAdd{"counter", 1},
                      [&, i](kv::KvResult result) {
                        order.push_back(i);
                        answers.push_back(std::holds_alternative<kv::KvCounter>(result)
                                              ? std::get<kv::KvCounter>(result).value
                                              : -1);
                      });
  }
  CHECK(answers.empty());  // nothing completes inside start()
  REQUIRE(loop.run_until([&] { return answers.size() == kAdds; }));
  std::vector<int64_t> expected_order(kAdds);
  std::vector<int64_t> expected_answers(kAdds);
  for (int64_t i = 0; i < kAdds; ++i) {
    expected_order[i] = i;
    expected_answers[i] = i + 1;
  }
  CHECK(order == expected_order);
  CHECK(answers == expected_answers);
  CHECK(server->connection_count() == 1);
}

TEST_CASE("waits time out and are cancelled; their connection serves the next wait", "[store_kv]") {
  const auto server = start_server();
  Loop loop;
  Client client(loop, options_for(server->port()));
  expect<kv::KvDone>(client.call(kv::KvSet{"present", "1"}));
  CHECK(expect<kv::KvReady>(client.call(kv::KvWait{{"present"}, 10s})).ready);
  CHECK(server->connection_count() == 2);  // the main one and one for waits

  uint64_t id = 0;
  const Slot cancelled = client.start(kv::KvWait{{"missing"}, 60s}, &id);
  client.kv().cancel(id);
  client.kv().cancel(id);  // finished: ignored
  CHECK(expect<kv::KvReady>(client.call(kv::KvWait{{"present"}, 10s})).ready);
  CHECK(server->connection_count() == 2);

  CHECK_FALSE(expect<kv::KvReady>(client.call(kv::KvWait{{"missing"}, 100ms})).ready);
  CHECK(expect<kv::KvReady>(client.call(kv::KvWait{{"present"}, 10s})).ready);
  CHECK(server->connection_count() == 2);

  // Two waits at once need two connections; a wait for a key set meanwhile ends.
  const Slot first = client.start(kv::KvWait{{"later"}, 60s});
  const Slot second = client.start(kv::KvWait{{"later", "present"}, 60s});
  expect<kv::KvDone>(client.call(kv::KvSet{"later", "1"}));
  REQUIRE(loop.run_until([&] { return first->has_value() && second->has_value(); }));
  CHECK(expect<kv::KvReady>(**first).ready);
  CHECK(expect<kv::KvReady>(**second).ready);
  CHECK(server->connection_count() == 3);
  CHECK_FALSE(cancelled->has_value());
}

TEST_CASE("an ADD to junk: every op on the connection the server closed fails kCorrupt, naming it",
          "[store_kv]") {
  const auto server = start_server();
  Loop loop;
  Client client(loop, options_for(server->port()));
  expect<kv::KvDone>(client.call(kv::KvSet{"junk", "\xff\xfe not a number"}));
  expect<kv::KvDone>(client.call(kv::KvSet{"near_max", "9223372036854775807"}));
  expect<kv::KvDone>(client.call(kv::KvSet{"plain", "v"}));

  // The GET goes out behind the ticket ADD on the same connection, so the server's close
  // reaches it too: it hears the same diagnosis, not "the server closed the connection".
  const Slot ticket = client.start(kv::KvTakeTicket{"junk", "me"});
  const Slot get = client.start(kv::KvGet{"plain"});
  REQUIRE(loop.run_until([&] { return ticket->has_value() && get->has_value(); }));
  for (const Slot& slot : {ticket, get}) {
    const auto error = expect_error(**slot, kv::KvErrorKind::kCorrupt);
    CHECK_THAT(error.message, Catch::Contains("the key 'junk' is corrupt: holds 15 bytes, not a "
                                              "counter"));
  }

  // A counter an ADD would take past int64: the server refuses it (no wrap-around), the client
  // says which key and why.
  const auto overflow =
      expect_error(client.call(kv::KvBeat{"near_max"}), kv::KvErrorKind::kCorrupt);
  CHECK_THAT(overflow.message, Catch::Contains("the key 'near_max' is corrupt: the counter holds "
                                               "9223372036854775807: adding 1 overflows 64 bits"));
  CHECK(expect<kv::KvCounter>(client.call(kv::KvAdd{"near_max", -7})).value == 9223372036854775800);

  // The backend goes on over a fresh connection, and a connection the server closed for no
  // junk still reads as unreachable (the store dying is tested below).
  CHECK(expect<kv::KvCounter>(client.call(kv::KvAdd{"fine", 2})).value == 2);
  CHECK(expect<kv::KvValue>(client.call(kv::KvGet{"plain"})).value == Value("v"));
}

TEST_CASE("a store that dies with ops in flight: kUnreachable, then no reconnect", "[store_kv]") {
  StoreDaemon store;
  Loop loop;
  auto options = options_for(store.port);
  options.reconnect_timeout = 300ms;
  Client client(loop, options);
  expect<kv::KvDone>(client.call(kv::KvSet{"present", "1"}));
  CHECK(expect<kv::KvReady>(client.call(kv::KvWait{{"present"}, 10s})).ready);

  // Stopped first, so that the ops below stay unanswered until it dies.
  store.process.signal(SIGSTOP);
  await_stopped(store.process.pid());
  const Slot add = client.start(kv::KvAdd{"counter", 1});
  const Slot wait = client.start(kv::KvWait{{"missing"}, 60s});
  store.process.signal(SIGKILL);
  REQUIRE(store.process.wait_exit(10s).has_value());
  REQUIRE(loop.run_until([&] { return add->has_value() && wait->has_value(); }));
  const auto add_error = expect_error(**add, kv::KvErrorKind::kUnreachable);
  CHECK_THAT(add_error.message, Catch::Contains("127.0.0.1:" + std::to_string(store.port)) &&
                                    Catch::Contains("ADD 'counter'"));
  expect_error(**wait, kv::KvErrorKind::kUnreachable);

  // Nobody listens any more: the next op gives up after reconnect_timeout, and so the store
  // is gone for every later op.
  const auto later = expect_error(client.call(kv::KvGet{"present"}), kv::KvErrorKind::kUnreachable);
  CHECK_THAT(later.message, Catch::Contains("no connection within 300 ms"));
  expect_error(client.call(kv::KvAdd{"counter", 1}), kv::KvErrorKind::kUnreachable);
  expect_error(client.call(kv::KvWait{{"present"}, 10s}), kv::KvErrorKind::kUnreachable);
}

TEST_CASE("a wait's connection may take longer than reconnect_timeout while the store is up",
          "[store_kv]") {
  // A store at its connection limit closes new connections (as one with thousands of agents
  // connecting at once is merely slow to accept them): not a store that went away, so the wait
  // must not fail after reconnect_timeout, and the backend must not give up on the store.
  StoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.limits.max_connections = 2;
  const auto server = StoreServer::start(server_options);
  Loop loop;
  auto options = options_for(server->port());
  options.reconnect_timeout = 200ms;
  Client client(loop, options);
  expect<kv::KvDone>(client.call(kv::KvSet{"present", "1"}));  // the main connection

  // The second and last slot, taken by another client (admitted: it gets an answer).
  auto other = std::make_unique<ddprun::rendezvous::store::testing::RawConnection>(server->port());
  other->send(ddprun::rendezvous::store::testing::hex(
      "00 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31"  // SET "/k1" "v1"
      "05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31"));     // CHECK ["/k1"]
  CHECK(other->receive(1) == std::string(1, '\0'));                        // READY

  const Slot wait = client.start(kv::KvWait{{"later"}, 60s});
  bool pending_when_freed = false;
  boost::asio::steady_timer later(loop.io, 1s);  // five times reconnect_timeout
  later.async_wait([&](const boost::system::error_code&) {
    pending_when_freed = !wait->has_value();
    other.reset();
    client.start(kv::KvSet{"later", "1"});
  });
  REQUIRE(loop.run_until([&] { return wait->has_value(); }));
  CHECK(pending_when_freed);
  CHECK(expect<kv::KvReady>(**wait).ready);
  CHECK(expect<kv::KvValue>(client.call(kv::KvGet{"later"})).value == Value{"1"});
}

TEST_CASE("a store that never answers: kUnresponsive after op_timeout", "[store_kv]") {
  SECTION("it accepts connections and reads nothing") {
    Loop loop;
    SilentServer silent(loop.io);
    auto options = options_for(silent.port());
    options.op_timeout = 300ms;
    Client client(loop, options);
    const auto error =
        expect_error(client.call(kv::KvAdd{"counter", 1}), kv::KvErrorKind::kUnresponsive);
    CHECK_THAT(error.message, Catch::Contains("127.0.0.1:" + std::to_string(silent.port())) &&
                                  Catch::Contains("ADD 'counter'") &&
                                  Catch::Contains("within 300 ms"));
  }
  SECTION("it stops in the middle; the next op gets a new connection once it runs again") {
    StoreDaemon store;
    Loop loop;
    auto options = options_for(store.port);
    options.op_timeout = 2s;  // once resumed, the store answers well within it
    Client client(loop, options);
    expect<kv::KvDone>(client.call(kv::KvSet{"present", "1"}));
    store.process.signal(SIGSTOP);
    await_stopped(store.process.pid());
    const auto error =
        expect_error(client.call(kv::KvGet{"present"}), kv::KvErrorKind::kUnresponsive);
    CHECK_THAT(error.message, Catch::Contains("no answer to GET 'present' within 2000 ms"));
    store.process.signal(SIGCONT);
    CHECK(expect<kv::KvValue>(client.call(kv::KvGet{"present"})).value == Value{"1"});
  }
}

TEST_CASE("ops issued before the store starts wait for it (connect_timeout)", "[store_kv]") {
  Loop loop;
  const uint16_t port = unused_port(loop.io);
  Client client(loop, options_for(port));
  const Slot set = client.start(kv::KvSet{"k", "v"});
  const Slot add = client.start(kv::KvAdd{"counter", 2});
  const Slot get = client.start(kv::KvGet{"k"});
  const Slot wait = client.start(kv::KvWait{{"k"}, 60s});
  std::unique_ptr<StoreServer> server;
  bool pending_when_started = false;
  boost::asio::steady_timer later(loop.io, 300ms);  // the store's host boots late
  later.async_wait([&](const boost::system::error_code&) {
    pending_when_started =
        !set->has_value() && !add->has_value() && !get->has_value() && !wait->has_value();
    server = start_server(port);
  });
  REQUIRE(loop.run_until([&] {
    return set->has_value() && add->has_value() && get->has_value() && wait->has_value();
  }));
  CHECK(pending_when_started);
  expect<kv::KvDone>(**set);
  CHECK(expect<kv::KvCounter>(**add).value == 2);
  CHECK(expect<kv::KvValue>(**get).value == Value{"v"});
  CHECK(expect<kv::KvReady>(**wait).ready);
}

TEST_CASE("a huge length from the server is a protocol error, allocated for nothing",
          "[store_kv]") {
  constexpr uint64_t kHugeLength = uint64_t{1} << 30;  // 1 GiB, over the 64 MiB default limit
  Loop loop;
  HugeLengthServer hostile(loop.io, kHugeLength);
  Client client(loop, options_for(hostile.port()));
  const long rss_before = max_rss_kib();
  const auto error = expect_error(client.call(kv::KvCompareSet{"k", std::nullopt, "v"}),
                                  kv::KvErrorKind::kProtocol);
  CHECK_THAT(error.message,
             Catch::Contains(std::to_string(kHugeLength)) && Catch::Contains("COMPARE_SET 'k'"));
  constexpr long kHalfGibInKib = 512 * 1024;
  CHECK(max_rss_kib() - rss_before < kHalfGibInKib);
}

TEST_CASE("destroying the backend abandons its ops: no completion runs", "[store_kv]") {
  const auto server = start_server();
  Loop loop;
  // The add may well complete inside the first poll (the server answers from its own thread);
  // only a completion after the backend is gone would be a bug.
  bool destroyed = false;
  int completions_after_destruction = 0;
  const auto on_result = [&](kv::KvResult) { completions_after_destruction += destroyed ? 1 : 0; };
  {
    StoreKv kv(loop.io, options_for(server->port()));
    kv.start(1, kv::KvWait{{"missing"}, 60s}, on_result);
    kv.start(2, kv::KvAdd{"counter", 1}, on_result);
    kv.start(3, kv::KvWait{{"missing-too"}, 60s}, on_result);
    loop.io.poll();
  }
  destroyed = true;
  loop.io.poll();
  CHECK(completions_after_destruction == 0);
}

// Not a test: ops/s of pipelined adds from one StoreKv against ddprun-store. Run with
// `store_kv_test "[.throughput]"`.
TEST_CASE("throughput of pipelined adds", "[.throughput]") {
  StoreDaemon store;
  Loop loop;
  Client client(loop, options_for(store.port));
  expect<kv::KvCounter>(client.call(kv::KvAdd{"warm-up", 1}));
  constexpr int64_t kAdds = 200000;
  int64_t completed = 0;
  const auto started = Clock::now();
  for (int64_t i = 0; i < kAdds; ++i) {
    client.kv().start(static_cast<uint64_t>(i) + 100, kv::KvAdd{"counter", 1},
                      [&](kv::KvResult) { ++completed; });
  }
  REQUIRE(loop.run_until([&] { return completed == kAdds; }, 300s));
  const std::chrono::duration<double> elapsed = Clock::now() - started;
  std::cout << kAdds << " pipelined adds in " << elapsed.count()
            << " s: " << static_cast<long long>(kAdds / elapsed.count()) << " ops/s\n";
}
