// Our client against our server, in one process over loopback: every operation in both
// wire generations, timeouts that leave the connection usable, and reconnects.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "rendezvous/store/store_server.hpp"
#include "tests/rendezvous/store_client.hpp"

using namespace ddprun::rendezvous::store;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<StoreServer> start_server(uint16_t port = 0) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  return StoreServer::start(options);
}

StoreClientOptions client_options(uint16_t port, WireGeneration wire) {
  StoreClientOptions options;
  options.port = port;
  options.wire = wire;
  options.connect_timeout = 5s;
  options.op_timeout = 5s;
  return options;
}

}  // namespace

TEST_CASE("client and server agree on every operation", "[integration]") {
  const auto server = start_server();
  const auto wire = GENERATE(WireGeneration::g2, WireGeneration::g0);
  CAPTURE(generation_name(wire));
  const auto client = StoreClient::connect(client_options(server->port(), wire));

  client->set("k1", "v1");
  CHECK(client->get("k1") == "v1");
  CHECK(client->add("cnt", 5) == 5);
  CHECK(client->add("cnt", -2) == 3);
  CHECK(client->get("cnt") == "3");

  // The four COMPARE_SET cases of tcpstore_protocol.md §4.2.
  CHECK(client->compare_set("cs_missing", "", "X") == "X");
  CHECK(client->compare_set("cs_missing2", "Y", "Z") == "Y");
  CHECK_FALSE(client->check({"cs_missing2"}));
  CHECK(client->compare_set("k1", "v1", "v2") == "v2");
  CHECK(client->compare_set("k1", "bad", "v3") == "v2");

  CHECK(client->check({"k1", "cnt"}));
  CHECK_FALSE(client->check({"k1", "absent"}));
  CHECK(client->check({}));
  CHECK(client->num_keys() == 3);
  CHECK(client->delete_key("k1"));
  CHECK_FALSE(client->delete_key("k1"));
  CHECK(client->num_keys() == 2);

  const std::string binary("a\0b\0c", 5);
  client->set("bin", binary);
  CHECK(client->get("bin") == binary);
  client->set("empty", "");
  CHECK(client->get("empty").empty());

  client->multi_set({"m1", "m2"}, {"one", "two"});
  CHECK(client->multi_get({"m2", "m1"}) == std::vector<std::string>{"two", "one"});
  if (wire != WireGeneration::g0) {
    client->append("log", "ab");
    client->append("log", "cd");
    CHECK(client->get("log") == "abcd");
  } else {
    CHECK_THROWS_AS(client->append("log", "ab"), StoreError);
  }
}

TEST_CASE("requests longer than the server's first read arrive whole", "[integration]") {
  // The server reads a connection's first 512 bytes into a buffer of its own and the rest
  // into a shared one: requests just below, at and above that size, and above the shared
  // buffer's 64 KiB, must all be decoded intact.
  const auto server = start_server();
  const auto wire = GENERATE(WireGeneration::g2, WireGeneration::g0);
  CAPTURE(generation_name(wire));
  const auto client = StoreClient::connect(client_options(server->port(), wire));
  for (const std::size_t size : {480, 495, 496, 497, 512, 4096, 64 * 1024 + 1, 300 * 1024}) {
    CAPTURE(size);
    std::string value(size, '\0');
    for (std::size_t i = 0; i < size; ++i) {
      value[i] = static_cast<char>(i * 7 + size);
    }
    std::string key = std::to_string(size);
    key.push_back('v');
    client->set(key, value);
    CHECK(client->get(key) == value);
  }
  CHECK(client->add("after", 1) == 1);  // the stream is still in step
}

TEST_CASE("a timed-out wait returns false and the client stays usable", "[integration]") {
  const auto server = start_server();
  const auto wire = GENERATE(WireGeneration::g2, WireGeneration::g0);
  CAPTURE(generation_name(wire));
  const auto client = StoreClient::connect(client_options(server->port(), wire));
  const auto setter = StoreClient::connect(client_options(server->port(), wire));

  const auto started = std::chrono::steady_clock::now();
  CHECK_FALSE(client->wait({"never"}, 200ms));
  CHECK(std::chrono::steady_clock::now() - started >= 200ms);
  CHECK_THROWS_AS(client->get("never", 100ms), StoreTimeout);

  // The cancelled wait must leave nothing behind: setting the key now sends no stray byte
  // that a later reply would be read out of step with.
  setter->set("never", "now");
  CHECK(client->add("after", 7) == 7);
  CHECK(client->get("never") == "now");
  CHECK(client->num_keys() == 2);
}

TEST_CASE("get blocks until another client sets the key", "[integration]") {
  const auto server = start_server();
  const auto waiter = StoreClient::connect(client_options(server->port(), WireGeneration::g2));
  std::thread setter_thread([port = server->port()] {
    const auto setter = StoreClient::connect(client_options(port, WireGeneration::g0));
    // Set only once the waiter is registered: it is when the server holds a pending wait.
    while (!setter->check({"registered"})) {
      std::this_thread::yield();
    }
    setter->set("late", "value");
  });
  waiter->set("registered", "1");
  CHECK(waiter->get("late", 5s) == "value");
  setter_thread.join();
}

TEST_CASE("wait on several keys ends when the last one appears", "[integration]") {
  const auto server = start_server();
  const auto waiter = StoreClient::connect(client_options(server->port(), WireGeneration::g2));
  const auto other = StoreClient::connect(client_options(server->port(), WireGeneration::g2));
  other->set("a", "1");
  CHECK_FALSE(waiter->wait({"a", "b"}, 100ms));
  other->add("b", 1);
  CHECK(waiter->wait({"a", "b", "a"}, 1s));
}

TEST_CASE("idempotent operations survive a server restart", "[integration]") {
  auto server = start_server();
  const uint16_t port = server->port();
  const auto client = StoreClient::connect(client_options(port, WireGeneration::g2));
  client->set("k", "v");
  server.reset();
  server = start_server(port);
  // The first use notices the broken connection, reconnects with backoff and retries.
  client->set("k", "again");
  CHECK(client->get("k") == "again");
  CHECK(client->num_keys() == 1);
}

TEST_CASE("connect gives up after connect_timeout with a clear error", "[integration]") {
  // A port bound but not listening refuses every connection, and stays ours: a port merely
  // freed could be taken meanwhile by a server of a test running beside this one, or be the
  // client's own ephemeral port (a loopback self-connect), and then the connect succeeds.
  const int refusing = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(refusing >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  auto* generic = reinterpret_cast<sockaddr*>(&address);
  REQUIRE(::bind(refusing, generic, sizeof(address)) == 0);
  REQUIRE(::getsockname(refusing, generic, &length) == 0);
  const uint16_t port = ntohs(address.sin_port);
  auto options = client_options(port, WireGeneration::g2);
  options.connect_timeout = 300ms;
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(StoreClient::connect(options), Catch::Contains("cannot connect"));
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  ::close(refusing);
}
