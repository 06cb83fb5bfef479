// The job secret on a live server: agents that prove it touch their keys, a wrong or missing
// secret is refused at once, PyTorch's keys ("/...") need nothing, and hostile or half-sent
// handshakes close only their own connection while a good client goes on. And strangers, who
// never prove it: the opening deadline, the cap on opening connections (a new one closes the
// oldest), the cap on clients without the proof, their own memory budget, and refusals that
// come before a value is buffered; an agent that knows the secret keeps being served.

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "raw_connection.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/store_server.hpp"
#include "rendezvous/store/wire_codec.hpp"
#include "tests/rendezvous/loopback_store.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;
using ddprun::rendezvous::store::testing::RawConnection;
using namespace std::chrono_literals;
namespace wire = ddprun::rendezvous::wire;

namespace {

const std::string kSecret = "0123456789abcdef-job-secret";

std::unique_ptr<StoreServer> start_server(const std::string& secret,
                                          const StoreLimits& limits = StoreLimits{}) {
  return testing::start_loopback_store(secret, limits);
}

std::unique_ptr<StoreClient> client(uint16_t port, const std::string& secret) {
  return testing::loopback_client(port, secret);
}

// A G2 request naming one key (GET, or the head of a SET whose value follows).
std::string key_request(Command command, const std::string& key) {
  std::string request;
  wire::append_u8(request, *opcode_for_command(WireGeneration::g2, command));
  wire::append_bytes(request, key);
  return request;
}

std::string get_request(const std::string& key) {
  return key_request(Command::get, key);
}

std::string set_request(const std::string& key, const std::string& value) {
  std::string request = key_request(Command::set, key);
  wire::append_bytes(request, value);
  return request;
}

std::string ping_request(uint32_t nonce) {
  std::string request;
  wire::append_u8(request, *opcode_for_command(WireGeneration::g2, Command::ping));
  wire::append_u32(request, nonce);
  return request;
}

const std::string kValidate = hex("00 ce f7 85 3c");
// The agent's nonce in the handshakes made by hand below.
const std::string kAgentNonce(kAuthNonceBytes, '\x6e');
const std::string kHello = auth_hello_request(kAgentNonce);

// The AUTH_PROOF an agent that knows the secret sends for the store's challenge (status, store
// nonce, store proof), after checking the store's proof.
std::string proof_for(const std::string& challenge) {
  const auto answer = answer_store_challenge(
      kSecret, kAgentNonce, static_cast<std::uint8_t>(challenge.at(0)), challenge.substr(1));
  REQUIRE_FALSE(answer.refusal);
  return answer.proof_request;
}
const std::string kAccepted(1, static_cast<char>(kAuthAccepted));
const std::string kRefused(1, static_cast<char>(kAuthRefused));

// A connection that made a request without the proof: a guest, as PyTorch's clients are.
void make_guest(RawConnection& connection) {
  connection.send(kValidate + get_request("/x"));
  CHECK(connection.receive(8) == hex("00 00 00 00 00 00 00 00"));  // an empty value
}

bool still_open(RawConnection& connection) {
  return connection.silent_for(100ms);
}

}  // namespace

TEST_CASE("an agent that knows the secret uses the agents' keys", "[job_secret]") {
  const auto server = start_server(kSecret);
  const auto agent = client(server->port(), kSecret);
  agent->set("ddprun/rdzv/job/round", "1");
  CHECK(agent->get("ddprun/rdzv/job/round") == "1");
  CHECK(agent->add("ddprun/rdzv/job/counter", 2) == 2);
  CHECK(agent->compare_set("ddprun/rdzv/job/round", "1", "2") == "2");
}

TEST_CASE("a wrong secret is refused at once, and never retried", "[job_secret]") {
  const auto server = start_server(kSecret);
  const auto started = std::chrono::steady_clock::now();
  try {
    client(server->port(), "not-the-secret");
    FAIL("a wrong secret was accepted");
  } catch (const StoreAuthRefused& refused) {
    // The client cannot tell a store with another secret from an impostor: it names both.
    CHECK(std::string(refused.what()).find("its proof of it is wrong") != std::string::npos);
    CHECK(std::string(refused.what()).find("or the secrets differ") != std::string::npos);
    CHECK(std::string(refused.what()).find("127.0.0.1:" + std::to_string(server->port())) !=
          std::string::npos);
  }
  // Well before connect_timeout (10 s): a refusal is not retried.
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  // The store goes on serving those who know it.
  CHECK(client(server->port(), kSecret)->add("ddprun/rdzv/job/n", 1) == 1);
}

TEST_CASE("without the secret: PyTorch's keys work, the agents' keys close the connection",
          "[job_secret]") {
  const auto server = start_server(kSecret);
  const auto agent = client(server->port(), kSecret);
  agent->set("ddprun/rdzv/job/round", "7");
  const auto outsider = client(server->port(), "");
  outsider->set("/worker-key", "w");
  CHECK(outsider->get("/worker-key") == "w");
  CHECK(outsider->add("/counter", 5) == 5);
  CHECK_THROWS_AS(outsider->compare_set("ddprun/rdzv/job/round", "7", "junk"), StoreError);
  CHECK(agent->get("ddprun/rdzv/job/round") == "7");
}

TEST_CASE("a raw client without auth cannot SET junk into the job's keys", "[job_secret]") {
  const auto server = start_server(kSecret);
  const auto agent = client(server->port(), kSecret);
  agent->set("ddprun/rdzv/job/round", "3");
  RawConnection raw(server->port());
  raw.send(kValidate + set_request("ddprun/rdzv/job/round", "junk"));
  CHECK(raw.closed_within(5000ms));
  CHECK(agent->get("ddprun/rdzv/job/round") == "3");
  // A legacy (G0) connection is gated the same way.
  RawConnection legacy(server->port());
  legacy.send(hex("00") + set_request("ddprun/rdzv/job/round", "junk").substr(1));
  CHECK(legacy.closed_within(5000ms));
  CHECK(agent->get("ddprun/rdzv/job/round") == "3");
}

TEST_CASE("the handshake by hand: split, truncated, replayed, malformed", "[job_secret]") {
  const auto server = start_server(kSecret);
  const auto agent = client(server->port(), kSecret);
  agent->set("ddprun/rdzv/job/round", "1");

  SECTION("sent one byte at a time, the handshake still works") {
    RawConnection raw(server->port());
    for (const char byte : kValidate + kHello) {
      raw.send(std::string(1, byte));
    }
    const std::string challenge = raw.receive(kAuthChallengeBytes);
    REQUIRE(challenge[0] == static_cast<char>(kAuthChallenge));
    const std::string proof = proof_for(challenge);
    for (const char byte : proof) {
      raw.send(std::string(1, byte));
    }
    CHECK(raw.receive(1) == std::string(1, static_cast<char>(kAuthAccepted)));
    raw.send(get_request("ddprun/rdzv/job/round"));
    CHECK(raw.receive(9) == hex("01 00 00 00 00 00 00 00") + "1");
  }
  SECTION("a proof cut short and abandoned stalls nobody") {
    RawConnection raw(server->port());
    raw.send(kValidate + kHello);
    raw.receive(kAuthChallengeBytes);
    raw.send(auth_proof_request(std::string(kAuthProofBytes, 'x')).substr(0, 10));
    CHECK(raw.silent_for(200ms));
    CHECK(agent->add("ddprun/rdzv/job/alive", 1) == 1);
  }
  SECTION("a wrong proof gets REFUSED, then the connection closes") {
    RawConnection raw(server->port());
    raw.send(kValidate + kHello);
    raw.receive(kAuthChallengeBytes);
    raw.send(auth_proof_request(std::string(kAuthProofBytes, 'x')));
    CHECK(raw.receive(1) == std::string(1, static_cast<char>(kAuthRefused)));
    CHECK(raw.closed_within(5000ms));
  }
  // What StoreKv's dialer sends on a connection once it knows the generation: two writes, each
  // answered in full, with no round trip for the secret alone.
  SECTION("pipelined: HELLO in the handshake's write, the first request in the proof's") {
    RawConnection raw(server->port());
    raw.send(kValidate + ping_request(0x00ABCDEF) + kHello);
    CHECK(raw.receive(4) == hex("ef cd ab 00"));
    const std::string challenge = raw.receive(kAuthChallengeBytes);
    REQUIRE(challenge[0] == static_cast<char>(kAuthChallenge));
    raw.send(proof_for(challenge) + get_request("ddprun/rdzv/job/round"));
    CHECK(raw.receive(1) == kAccepted);
    CHECK(raw.receive(9) == hex("01 00 00 00 00 00 00 00") + "1");
  }
  SECTION("a wrong proof with the agents' requests behind it: REFUSED, closed, none served") {
    RawConnection raw(server->port());
    raw.send(kValidate + kHello);
    raw.receive(kAuthChallengeBytes);
    raw.send(auth_proof_request(std::string(kAuthProofBytes, 'x')) +
             set_request("ddprun/rdzv/job/round", "junk") + get_request("ddprun/rdzv/job/round"));
    CHECK(raw.receive(1) == kRefused);
    // Not a byte more: the GET got no answer (and the SET, checked below, was not applied).
    CHECK_THROWS_AS(raw.receive(1), SocketBroken);
  }
  SECTION("a proof from another connection's challenge is refused") {
    RawConnection first(server->port());
    first.send(kValidate + kHello);
    const std::string challenge = first.receive(kAuthChallengeBytes);
    RawConnection second(server->port());
    second.send(kValidate + kHello);
    const std::string other = second.receive(kAuthChallengeBytes);
    CHECK(challenge.substr(1, kAuthNonceBytes) != other.substr(1, kAuthNonceBytes));
    second.send(proof_for(challenge));
    CHECK(second.receive(1) == std::string(1, static_cast<char>(kAuthRefused)));
  }
  SECTION("a proof without a challenge, and an unknown version, close the connection") {
    RawConnection no_challenge(server->port());
    no_challenge.send(kValidate + auth_proof_request(std::string(kAuthProofBytes, 'x')));
    CHECK(no_challenge.closed_within(5000ms));
    RawConnection bad_version(server->port());
    bad_version.send(kValidate + hex("d0 03"));
    CHECK(bad_version.closed_within(5000ms));
    // ddprun's one-sided handshake of before (version 1, no agent nonce).
    RawConnection one_sided(server->port());
    one_sided.send(kValidate + hex("d0 01"));
    CHECK(one_sided.closed_within(5000ms));
  }
  SECTION("while proving, nothing but PING and the proof is read") {
    RawConnection raw(server->port());
    raw.send(kValidate + kHello);
    raw.receive(kAuthChallengeBytes);
    raw.send(ping_request(0x00000042));
    CHECK(raw.receive(4) == hex("42 00 00 00"));
    raw.send(get_request("/worker-key"));
    CHECK(raw.closed_within(5000ms));
  }
  SECTION("a second HELLO on one connection closes it") {
    RawConnection raw(server->port());
    raw.send(kValidate + kHello);
    raw.receive(kAuthChallengeBytes);
    raw.send(kHello);
    CHECK(raw.closed_within(5000ms));
  }
  CHECK(agent->get("ddprun/rdzv/job/round") == "1");
}

TEST_CASE("LIST_KEYS names the agents' keys only to connections that proved the secret",
          "[job_secret]") {
  const auto server = start_server(kSecret);
  const auto agent = client(server->port(), kSecret);
  agent->set("ddprun/rdzv/job/round", "1");
  agent->set("/worker-key", "w");
  const std::string list_keys(
      1, static_cast<char>(*opcode_for_command(WireGeneration::g2, Command::list_keys)));
  const auto listing = [](std::initializer_list<std::string> keys) {
    std::string reply;
    wire::append_u64(reply, keys.size());
    for (const auto& key : keys) {
      wire::append_bytes(reply, key);
    }
    return reply;
  };

  RawConnection outsider(server->port());
  outsider.send(kValidate + list_keys);
  const std::string only_pytorch = listing({"/worker-key"});
  CHECK(outsider.receive(only_pytorch.size()) == only_pytorch);
  CHECK(outsider.silent_for(100ms));  // nothing more: the count said one key

  RawConnection proved(server->port());
  proved.send(kValidate + kHello);
  const std::string challenge = proved.receive(kAuthChallengeBytes);
  proved.send(proof_for(challenge) + list_keys);
  CHECK(proved.receive(1) == std::string(1, static_cast<char>(kAuthAccepted)));
  const std::string both = listing({"/worker-key", "ddprun/rdzv/job/round"});
  CHECK(proved.receive(both.size()) == both);
}

TEST_CASE("a client with a secret refuses a store that has none, or that proves another",
          "[job_secret]") {
  for (const std::string& store_secret : {std::string(), std::string("another-job-secret-42")}) {
    CAPTURE(store_secret);
    const auto server = start_server(store_secret);
    try {
      client(server->port(), kSecret);
      FAIL("the client believed a store that does not know the job secret");
    } catch (const StoreAuthRefused& refused) {
      CHECK(std::string(refused.what()).find("does not know the job secret") != std::string::npos);
      CHECK(std::string(refused.what()).find("127.0.0.1:" + std::to_string(server->port())) !=
            std::string::npos);
    }
  }
}

TEST_CASE("a new connection closes the oldest that has not opened yet", "[integration]") {
  StoreLimits limits;
  limits.max_opening_connections = 4;
  const auto server = start_server(kSecret, limits);
  const auto proved = client(server->port(), kSecret);
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
  CHECK(client(server->port(), kSecret)->get("ddprun/rdzv/job/round") == "1");
  CHECK(proved->add("ddprun/rdzv/job/n", 1) == 1);
}

TEST_CASE("5 s to prove the secret or make a request", "[integration]") {
  const auto server = start_server(kSecret);
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
  guest.send(get_request("/x"));
  CHECK(guest.receive(8) == hex("00 00 00 00 00 00 00 00"));
}

TEST_CASE("clients without the proof are capped; agents are not", "[integration]") {
  StoreLimits limits;
  limits.max_guest_connections = 2;
  const auto server = start_server(kSecret, limits);
  RawConnection first(server->port());
  make_guest(first);
  RawConnection second(server->port());
  make_guest(second);
  RawConnection third(server->port());
  third.send(kValidate + get_request("/x"));
  CHECK(third.closed_within(5s));
  const auto proved = client(server->port(), kSecret);
  proved->set("ddprun/rdzv/job/round", "1");
  CHECK(proved->get("ddprun/rdzv/job/round") == "1");
  CHECK(still_open(first));
}

TEST_CASE("strangers' data has a budget of its own", "[integration]") {
  StoreLimits limits;
  // A value is charged twice while it is stored (its request's buffer, then the value).
  limits.max_open_bytes = 2 * 1024 * 1024;
  limits.max_total_bytes = 16 * 1024 * 1024;
  const auto server = start_server(kSecret, limits);
  RawConnection guest(server->port());
  guest.send(kValidate + set_request("/big", std::string(800 * 1024, 'g')));
  guest.send(get_request("/none"));
  CHECK(guest.receive(8) == hex("00 00 00 00 00 00 00 00"));
  // A second value does not fit in the strangers' budget: that connection closes.
  RawConnection greedy(server->port());
  greedy.send(kValidate + set_request("/bigger", std::string(800 * 1024, 'h')));
  CHECK(greedy.closed_within(5s));
  // The agents' budget is untouched: a value larger than the strangers' whole budget fits.
  const auto proved = client(server->port(), kSecret);
  proved->set("ddprun/rdzv/job/blob", std::string(3 * 1024 * 1024, 'a'));
  CHECK(proved->get("ddprun/rdzv/job/blob").size() == 3 * 1024 * 1024);
}

TEST_CASE("a write to an agents' key is refused before its value is buffered", "[integration]") {
  const auto server = start_server(kSecret);
  const std::size_t before = server->memory_used();
  RawConnection stranger(server->port());
  std::string header = kValidate + key_request(Command::set, "ddprun/rdzv/job/round");
  wire::append_u64(header, 8 * 1024 * 1024 - 1);  // announced, and only a little of it sent
  stranger.send(header + std::string(1024, 'x'));
  CHECK(stranger.closed_within(5s));
  CHECK(server->memory_used() <= before + 4096);
  // While proving, only PING and the proof are read: the rest closes at its opcode.
  RawConnection proving(server->port());
  proving.send(kValidate + auth_hello_request(std::string(kAuthNonceBytes, 'p')));
  proving.receive(kAuthChallengeBytes);
  proving.send(key_request(Command::set, "/k").substr(0, 3));
  CHECK(proving.closed_within(5s));
}
