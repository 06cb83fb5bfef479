// Bad input from the list, each against a live server with a small memory budget:
// the server stays up, stays within its budget, closes only the offending connection, and
// a well-behaved client running alongside keeps getting prompt answers.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <thread>

#include "raw_connection.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/store_server.hpp"
#include "tests/rendezvous/loopback_store.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;
using ddprun::rendezvous::store::testing::RawConnection;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBudget = 64 * 1024 * 1024;

std::unique_ptr<StoreServer> start_server(const std::string& secret = "") {
  StoreLimits limits;
  limits.max_total_bytes = kBudget;
  return testing::start_loopback_store(secret, limits);
}

std::unique_ptr<StoreClient> good_client(uint16_t port, const std::string& secret = "") {
  return testing::loopback_client(port, secret, 5s, 2s);
}

// The well-behaved client gets an answer, quickly.
void require_responsive(StoreClient& client) {
  const auto started = std::chrono::steady_clock::now();
  const auto before = client.add("alive", 1);
  CHECK(client.add("alive", 1) == before + 1);
  CHECK(std::chrono::steady_clock::now() - started < 500ms);
}

template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) {
      return true;
    }
    std::this_thread::sleep_for(5ms);  // polling a snapshot; there is no event to await
  }
  return predicate();
}

void raise_descriptor_limit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

TEST_CASE("random bytes close only the sender", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  std::mt19937 random(12345);
  int closed = 0;
  for (int round = 0; round < 20; ++round) {
    RawConnection garbage(server->port());
    std::string bytes(4096, '\0');
    for (auto& byte : bytes) {
      byte = static_cast<char>(random() & 0xFF);
    }
    // Avoid a valid-looking G2 start so the bytes are parsed as G0 requests.
    bytes[0] = static_cast<char>(0x10 | (bytes[0] & 0x0F));
    garbage.send(bytes);
    closed += garbage.closed_within(2s) ? 1 : 0;
    require_responsive(*client);
  }
  CHECK(closed == 20);  // an opcode >= 0x10 is unknown in G0
  CHECK(server->memory_used() <= kBudget);
}

TEST_CASE("a wrong VALIDATE magic closes the connection", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  RawConnection wrong(server->port());
  wrong.send(hex("00 ce f7 85 3d 0d 39 30 00 00"));
  CHECK(wrong.closed_within(2s));
  require_responsive(*client);
}

TEST_CASE("a length prefix of 2^63 is refused at once", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  RawConnection huge(server->port());
  huge.send(hex("00 00 00 00 00 00 00 00 80"));
  CHECK(huge.closed_within(2s));
  RawConnection huge_value(server->port());
  huge_value.send(hex(" 00 01 00 00 00 00 00 00 00 61 ff ff ff ff ff ff ff 7f"));
  CHECK(huge_value.closed_within(2s));
  RawConnection huge_count(server->port());
  huge_count.send(hex("05 00 00 00 00 00 00 00 80"));
  CHECK(huge_count.closed_within(2s));
  require_responsive(*client);
}

TEST_CASE("truncated messages stall nobody", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  {
    RawConnection dropped(server->port());
    dropped.send(hex("00 05 00 00 00 00 00 00 00 2f 6b"));  // half a SET, then gone
  }
  RawConnection stuck(server->port());
  stuck.send(hex("00 05 00 00 00 00 00 00 00 2f 6b"));  // half a SET, kept open
  require_responsive(*client);
  CHECK(stuck.silent_for(100ms));
  CHECK(eventually([&] { return server->connection_count() == 2; }));
}

TEST_CASE("a client sending one byte per second stalls nobody", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  RawConnection slow(server->port());
  // GETNUMKEYS is one byte; a SET of "/s" = "1" byte by byte would take 21 s, so trickle
  // its first bytes and check the others meanwhile, then finish it at once.
  const std::string set = hex("00 02 00 00 00 00 00 00 00 2f 73 01 00 00 00 00 00 00 00 31");
  for (std::size_t i = 0; i < 3; ++i) {
    slow.send(set.substr(i, 1));
    require_responsive(*client);
    std::this_thread::sleep_for(1s);  // the pace is the point of this test
  }
  slow.send(set.substr(3));
  CHECK(client->get("/s", 2s) == "1");
}

TEST_CASE("5,000 connections opened and dropped at once", "[integration]") {
  raise_descriptor_limit();
  const auto server = start_server();
  const auto client = good_client(server->port());
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> sockets;
  for (int i = 0; i < 5000; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    sockets.push_back(fd);
  }
  require_responsive(*client);
  for (const int fd : sockets) {
    ::close(fd);
  }
  require_responsive(*client);
  CHECK(eventually([&] { return server->connection_count() == 1; }, 20000ms));
  require_responsive(*client);
}

TEST_CASE("a WAIT on 100,000 keys is served and released", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  const auto baseline = server->memory_used();
  {
    RawConnection waiter(server->port());
    std::string request = hex("05");
    const std::uint64_t count = 100000;
    for (int i = 0; i < 8; ++i) {
      request.push_back(static_cast<char>((count >> (8 * i)) & 0xFF));
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::string key = "/k" + std::to_string(i);
      for (int b = 0; b < 8; ++b) {
        request.push_back(static_cast<char>((key.size() >> (8 * b)) & 0xFF));
      }
      request += key;
    }
    waiter.send(request);
    require_responsive(*client);
    CHECK(waiter.silent_for(50ms));
    CHECK(server->memory_used() > baseline);
    CHECK(server->memory_used() <= kBudget);
  }
  // Closing the waiter gives its registrations back.
  CHECK(eventually([&] { return server->memory_used() <= baseline + 1024; }));
  require_responsive(*client);
}

TEST_CASE("the memory budget holds against many large half-sent values", "[integration]") {
  const auto server = start_server();
  const auto client = good_client(server->port());
  // Each connection announces an 8 MiB value and sends 6 MiB of it: 20 of them would need
  // 120 MiB, the budget is 64 MiB.
  const std::string header = hex("00 01 00 00 00 00 00 00 00 76 00 00 80 00 00 00 00 00");
  const std::string chunk(6 * 1024 * 1024, 'x');
  std::vector<std::unique_ptr<RawConnection>> hogs;
  for (int i = 0; i < 20; ++i) {
    hogs.push_back(std::make_unique<RawConnection>(server->port()));
    try {
      hogs.back()->send(header + chunk);
    } catch (const std::exception&) {
      // the server may already have closed this one: that is the expected defence
    }
    CHECK(server->memory_used() <= kBudget);
  }
  require_responsive(*client);
  int closed = 0;
  for (auto& hog : hogs) {
    closed += hog->closed_within(200ms) ? 1 : 0;
  }
  CHECK(closed >= 10);
  CHECK(server->memory_used() <= kBudget);
  require_responsive(*client);
}

TEST_CASE("the connection cap refuses extra connections only", "[integration]") {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.limits.max_connections = 3;
  options.log_level = StoreLogLevel::quiet;
  const auto server = StoreServer::start(options);
  const auto client = good_client(server->port());
  RawConnection second(server->port());
  RawConnection third(server->port());
  CHECK(eventually([&] { return server->connection_count() == 3; }));
  RawConnection fourth(server->port());
  CHECK(fourth.closed_within(2s));
  require_responsive(*client);
}

TEST_CASE("junk in the job secret's handshake closes only the sender", "[integration]") {
  const std::string secret = "hostile-test-secret";
  const auto server = start_server(secret);
  const auto client = good_client(server->port(), secret);
  client->set("ddprun/rdzv/job/round", "1");
  std::mt19937 random(4242);
  int closed = 0;
  for (int round = 0; round < 20; ++round) {
    RawConnection garbage(server->port());
    // VALIDATE, AUTH_HELLO, then a "proof" of random bytes and more random bytes after it:
    // refused (the MAC is wrong), whatever follows.
    std::string bytes =
        hex("00 ce f7 85 3c") + auth_hello_request(std::string(kAuthNonceBytes, 'n'));
    garbage.send(bytes);
    CHECK(garbage.receive(kAuthChallengeBytes)[0] == static_cast<char>(kAuthChallenge));
    std::string junk(1 + kAuthProofBytes + 512, '\0');
    for (auto& byte : junk) {
      byte = static_cast<char>(random() & 0xFF);
    }
    junk[0] = static_cast<char>(kAuthProofOpcode);
    garbage.send(junk);
    closed += garbage.closed_within(2s) ? 1 : 0;
    require_responsive(*client);
  }
  CHECK(closed == 20);
  SECTION("AUTH_HELLO again and again: one challenge, then the connection closes") {
    RawConnection repeat(server->port());
    std::string hellos = hex("00 ce f7 85 3c");
    for (int i = 0; i < 3; ++i) {
      hellos += auth_hello_request(std::string(kAuthNonceBytes, static_cast<char>('a' + i)));
    }
    repeat.send(hellos);
    CHECK(repeat.receive(kAuthChallengeBytes)[0] == static_cast<char>(kAuthChallenge));
    CHECK(repeat.closed_within(2s));
    CHECK(server->memory_used() <= kBudget);
    require_responsive(*client);
  }
  SECTION("a proof cut short stalls nobody") {
    RawConnection half(server->port());
    half.send(hex("00 ce f7 85 3c") + auth_hello_request(std::string(kAuthNonceBytes, 'h')) +
              hex("d1 00 00 00"));
    CHECK(half.receive(kAuthChallengeBytes)[0] == static_cast<char>(kAuthChallenge));
    CHECK(half.silent_for(200ms));
    require_responsive(*client);
  }
  CHECK(client->get("ddprun/rdzv/job/round") == "1");
}
