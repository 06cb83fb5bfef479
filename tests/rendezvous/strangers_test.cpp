// A store with a job secret against connections that never prove it: the opening deadline, the
// cap on opening connections (a new one closes the oldest), the cap on clients without the
// proof, their own memory budget, and refusals that come before a value is buffered. Each case
// runs a real server with small limits; an agent that knows the secret keeps being served.

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "raw_connection.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/store_client.hpp"
#include "rendezvous/store/store_server.hpp"
#include "rendezvous/store/wire_codec.hpp"
#include "rendezvous/store/wire_protocol.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;
using ddprun::rendezvous::store::testing::RawConnection;
using namespace std::chrono_literals;
namespace wire = ddprun::rendezvous::wire;

namespace {

const std::string kSecret = "strangers-test-secret-0123456789";
const std::string kValidate = hex("00 ce f7 85 3c");

std::unique_ptr<StoreServer> start_server(const StoreLimits& limits) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.limits = limits;
  options.log_level = StoreLogLevel::quiet;
  options.secret = kSecret;
  return StoreServer::start(options);
}

std::unique_ptr<StoreClient> agent(uint16_t port) {
  StoreClientOptions options;
  options.port = port;
  options.connect_timeout = 5s;
  options.op_timeout = 5s;
  options.secret = kSecret;
  return StoreClient::connect(options);
}

std::string request(Command command, const std::string& key) {
  std::string bytes;
  wire::append_u8(bytes, *opcode_for_command(WireGeneration::g2, command));
  wire::append_bytes(bytes, key);
  return bytes;
}

std::string set_request(const std::string& key, const std::string& value) {
  return request(Command::set, key) + [&] {
    std::string bytes;
    wire::append_bytes(bytes, value);
    return bytes;
  }();
}

// A connection that made a request without the proof: a guest, as PyTorch's clients are.
void make_guest(RawConnection& connection) {
  connection.send(kValidate + request(Command::get, "/x"));
  CHECK(connection.receive(8) == hex("00 00 00 00 00 00 00 00"));  // an empty value
}

bool still_open(RawConnection& connection) {
  return connection.silent_for(100ms);
}

}  // namespace

TEST_CASE("a new connection closes the oldest that has not opened yet", "[integration]") {
  StoreLimits limits;
  limits.max_opening_connections = 4;
  const auto server = start_server(limits);
  const auto proved = agent(server->port());
  std::vector<std::unique_ptr<RawConnection>> silent;
  for (int i = 0; i < 4; ++i) {
    silent.push_back(std::make_unique<RawConnection>(server->port()));
  }
  // The agent's own connection is not among them: it proved the secret.
  proved->set("ddprun/rdzv/job/round", "1");
  RawConnection fifth(server->port());
  CHECK(silent[0]->closed_within(5s));
  CHECK(still_open(*silent[1]));
  // The agent connects anew and is served: its connection pushes out another silent one.
  CHECK(agent(server->port())->get("ddprun/rdzv/job/round") == "1");
  CHECK(proved->add("ddprun/rdzv/job/n", 1) == 1);
}

TEST_CASE("5 s to prove the secret or make a request", "[integration]") {
  const auto server = start_server(StoreLimits{});
  RawConnection silent(server->port());
  RawConnection proving(server->port());
  proving.send(kValidate + auth_hello_request(std::string(kAuthNonceBytes, 'n')));
  CHECK(proving.receive(kAuthChallengeBytes)[0] == static_cast<char>(kAuthChallenge));
  RawConnection guest(server->port());
  make_guest(guest);
  const auto opened = std::chrono::steady_clock::now();
  CHECK(silent.closed_within(10s));
  CHECK(proving.closed_within(10s));
  CHECK(std::chrono::steady_clock::now() - opened >= 4s);  // not before the deadline
  CHECK(still_open(guest));
  guest.send(request(Command::get, "/x"));
  CHECK(guest.receive(8) == hex("00 00 00 00 00 00 00 00"));
}

TEST_CASE("clients without the proof are capped; agents are not", "[integration]") {
  StoreLimits limits;
  limits.max_guest_connections = 2;
  const auto server = start_server(limits);
  RawConnection first(server->port());
  make_guest(first);
  RawConnection second(server->port());
  make_guest(second);
  RawConnection third(server->port());
  third.send(kValidate + request(Command::get, "/x"));
  CHECK(third.closed_within(5s));
  const auto proved = agent(server->port());
  proved->set("ddprun/rdzv/job/round", "1");
  CHECK(proved->get("ddprun/rdzv/job/round") == "1");
  CHECK(still_open(first));
}

TEST_CASE("strangers' data has a budget of its own", "[integration]") {
  StoreLimits limits;
  // A value is charged twice while it is stored (its request's buffer, then the value).
  limits.max_open_bytes = 2 * 1024 * 1024;
  limits.max_total_bytes = 16 * 1024 * 1024;
  const auto server = start_server(limits);
  RawConnection guest(server->port());
  guest.send(kValidate + set_request("/big", std::string(800 * 1024, 'g')));
  guest.send(request(Command::get, "/none"));
  CHECK(guest.receive(8) == hex("00 00 00 00 00 00 00 00"));
  // A second value does not fit in the strangers' budget: that connection closes.
  RawConnection greedy(server->port());
  greedy.send(kValidate + set_request("/bigger", std::string(800 * 1024, 'h')));
  CHECK(greedy.closed_within(5s));
  // The agents' budget is untouched: a value larger than the strangers' whole budget fits.
  const auto proved = agent(server->port());
  proved->set("ddprun/rdzv/job/blob", std::string(3 * 1024 * 1024, 'a'));
  CHECK(proved->get("ddprun/rdzv/job/blob").size() == 3 * 1024 * 1024);
}

TEST_CASE("a write to an agents' key is refused before its value is buffered", "[integration]") {
  const auto server = start_server(StoreLimits{});
  const std::size_t before = server->memory_used();
  RawConnection stranger(server->port());
  std::string header = kValidate + request(Command::set, "ddprun/rdzv/job/round");
  wire::append_u64(header, 8 * 1024 * 1024 - 1);  // announced, and only a little of it sent
  stranger.send(header + std::string(1024, 'x'));
  CHECK(stranger.closed_within(5s));
  CHECK(server->memory_used() <= before + 4096);
  // While proving, only PING and the proof are read: the rest closes at its opcode.
  RawConnection proving(server->port());
  proving.send(kValidate + auth_hello_request(std::string(kAuthNonceBytes, 'p')));
  proving.receive(kAuthChallengeBytes);
  proving.send(request(Command::set, "/k").substr(0, 3));
  CHECK(proving.closed_within(5s));
}
