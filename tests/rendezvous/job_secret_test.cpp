// The job secret's pieces without a network: SHA-256 and HMAC-SHA256 against the published
// vectors (FIPS 180-4's examples, RFC 4231), the secret's sources and checks, the extension's
// decoding in every wire generation, and the server's per-connection gate.

#include "rendezvous/store/job_secret.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <functional>
#include <span>
#include <string>

#include "common/random.hpp"
#include "raw_connection.hpp"
#include "rendezvous/store/auth_gate.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/request_decoder.hpp"
#include "rendezvous/store/sha256.hpp"
#include "secret_file.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;
using ddprun::rendezvous::store::testing::SecretFile;

namespace {

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const auto byte : digest) {
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0xf]);
  }
  return out;
}

std::span<const std::uint8_t> bytes_of(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const JobSecretError& error) {
    return error.what();
  }
  return "";
}

Request decoded(const std::string& bytes, WireGeneration generation) {
  const auto result = decode_request(bytes_of(bytes), generation, StoreLimits{});
  REQUIRE(result.status == DecodeStatus::complete);
  REQUIRE(result.consumed == bytes.size());
  return result.request;
}

}  // namespace

TEST_CASE("SHA-256 gives FIPS 180-4's example digests", "[job_secret][sha256]") {
  CHECK(to_hex(sha256("abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(to_hex(sha256(std::string(1000000, 'a'))) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 is the same however the input is split", "[job_secret][sha256]") {
  // 55, 56 and 64 bytes sit at the padding's edges (the length no longer fits the block).
  for (const std::size_t size : {55, 56, 63, 64, 65, 119, 120, 128}) {
    const std::string message(size, 'x');
    Sha256 split;
    split.update(message.substr(0, size / 3));
    split.update(message.substr(size / 3));
    CHECK(split.finish() == sha256(message));
  }
}

TEST_CASE("HMAC-SHA256 gives RFC 4231's test vectors", "[job_secret][hmac]") {
  std::string key4;
  for (int i = 1; i <= 25; ++i) {
    key4.push_back(static_cast<char>(i));
  }
  const std::string long_key(131, '\xaa');
  CHECK(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(to_hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  CHECK(to_hex(hmac_sha256(key4, std::string(50, '\xcd'))) ==
        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  CHECK(to_hex(hmac_sha256(long_key, "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(to_hex(hmac_sha256(
            long_key,
            "This is a test using a larger than block-size key and a larger than block-size "
            "data. The key needs to be hashed before being used by the HMAC algorithm.")) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("MACs are compared whole", "[job_secret][hmac]") {
  const std::string agent_nonce(32, 'a');
  const std::string store_nonce(32, 's');
  const std::string mac = store_proof("secret", agent_nonce, store_nonce);
  CHECK(mac.size() == kAuthProofBytes);
  CHECK(equal_in_constant_time(mac, store_proof("secret", agent_nonce, store_nonce)));
  std::string last_differs = mac;
  last_differs.back() = static_cast<char>(last_differs.back() ^ 1);
  CHECK_FALSE(equal_in_constant_time(mac, last_differs));
  CHECK_FALSE(equal_in_constant_time(mac, mac.substr(0, 31)));
  CHECK(mac != store_proof("secret", agent_nonce, std::string(32, 't')));
  CHECK(mac != store_proof("secreT", agent_nonce, store_nonce));
  // The directions differ: neither proof is the other's, whichever way the nonces are given.
  CHECK(mac != agent_proof("secret", store_nonce, agent_nonce));
  CHECK(mac != agent_proof("secret", agent_nonce, store_nonce));
}

TEST_CASE("a secret file must be private to its owner and hold a secret", "[job_secret]") {
  SECTION("mode 0600 is accepted; the final newline is not part of the secret") {
    const SecretFile file("a long s3cret value\n", 0600);
    CHECK(read_secret_file(file.path(), "--rdzv_conf secret_file") == "a long s3cret value");
  }
  SECTION("mode 0400 is accepted") {
    const SecretFile file("0123456789abcdef", 0400);
    CHECK(read_secret_file(file.path(), "--secret-file") == "0123456789abcdef");
  }
  SECTION("mode 0644 is refused, naming the file and its mode") {
    const SecretFile file("s3cret\n", 0644);
    const auto message =
        error_of([&] { read_secret_file(file.path(), "--rdzv_conf secret_file"); });
    CHECK(message.find(file.path()) != std::string::npos);
    CHECK(message.find("mode 0644") != std::string::npos);
    CHECK(message.find("--rdzv_conf secret_file") != std::string::npos);
  }
  SECTION("mode 0640 and 0602 are refused") {
    for (const mode_t mode : {mode_t{0640}, mode_t{0602}}) {
      const SecretFile file("s3cret\n", mode);
      CHECK_FALSE(error_of([&] { read_secret_file(file.path(), "--secret-file"); }).empty());
    }
  }
  SECTION("an empty file, or one of white space only, is refused") {
    for (const std::string contents : {"", "\n", "  \r\n"}) {
      const SecretFile file(contents, 0600);
      CHECK(error_of([&] {
              read_secret_file(file.path(), "--secret-file");
            }).find("the secret is empty") != std::string::npos);
    }
  }
  SECTION("fewer than 16 bytes once trailing blanks are trimmed is refused") {
    for (const std::string contents : {"0123456789abcde\n", "0123456789abcde \t\r\n", "x"}) {
      const SecretFile file(contents, 0600);
      const auto message = error_of([&] { read_secret_file(file.path(), "--secret-file"); });
      CHECK(message.find(file.path()) != std::string::npos);
      CHECK(message.find("bytes long (trailing blanks not counted); at least 16 are needed") !=
            std::string::npos);
    }
  }
  SECTION("a file larger than any secret is refused") {
    const SecretFile file(std::string(64 * 1024 + 1, 'k'), 0600);
    CHECK(error_of([&] {
            read_secret_file(file.path(), "--secret-file");
          }).find("bytes is more than a secret") != std::string::npos);
  }
  SECTION("a missing file is refused, naming it") {
    CHECK(error_of([] {
            read_secret_file("/nonexistent/ddprun.key", "--secret-file");
          }).find("/nonexistent/ddprun.key: cannot open") != std::string::npos);
  }
  CHECK(secret_file_mode_problem(S_IFREG | 0600) == std::nullopt);
  CHECK(secret_file_mode_problem(S_IFREG | 0604).has_value());
}

TEST_CASE("the secret comes from the option, the file variable or the secret variable",
          "[job_secret]") {
  const SecretFile option_file("from-the-option-file\n", 0600);
  const SecretFile variable_file("from-the-file-variable\n", 0600);
  const std::string variable = "from-the-secret-variable";
  SECTION("nothing anywhere: no secret") {
    CHECK_FALSE(resolve_job_secret(std::nullopt, "--secret-file", std::nullopt, std::nullopt));
  }
  SECTION("the option wins over both variables") {
    const auto secret = resolve_job_secret(option_file.path(), "--rdzv_conf secret_file",
                                           variable_file.path(), variable);
    REQUIRE(secret);
    CHECK(secret->value == "from-the-option-file");
    CHECK(secret->source.find("--rdzv_conf secret_file") != std::string::npos);
  }
  SECTION("DDPRUN_RDZV_SECRET_FILE wins over DDPRUN_RDZV_SECRET") {
    const auto secret =
        resolve_job_secret(std::nullopt, "--secret-file", variable_file.path(), variable);
    REQUIRE(secret);
    CHECK(secret->value == "from-the-file-variable");
    CHECK(secret->source.find("DDPRUN_RDZV_SECRET_FILE") != std::string::npos);
  }
  SECTION("DDPRUN_RDZV_SECRET alone; its source never shows the secret") {
    const auto secret = resolve_job_secret(std::nullopt, "--secret-file", std::nullopt, variable);
    REQUIRE(secret);
    CHECK(secret->value == variable);
    CHECK(secret->source.find("DDPRUN_RDZV_SECRET") != std::string::npos);
    CHECK(secret->source.find(variable) == std::string::npos);
  }
  SECTION("an empty DDPRUN_RDZV_SECRET is refused") {
    CHECK(error_of([] {
            resolve_job_secret(std::nullopt, "--secret-file", std::nullopt, "");
          }).find("DDPRUN_RDZV_SECRET: the secret is empty") != std::string::npos);
  }
  SECTION("16 bytes are enough, 15 are not; trailing blanks do not count, leading ones do") {
    const auto resolved = [](std::string_view value) {
      return resolve_job_secret(std::nullopt, "--secret-file", std::nullopt, value);
    };
    CHECK(resolved("0123456789abcdef")->value == "0123456789abcdef");
    CHECK(resolved("0123456789abcdef \t\r\n")->value == "0123456789abcdef");
    CHECK(resolved(" 123456789abcdef")->value == " 123456789abcdef");
    for (const std::string_view weak : {"0123456789abcde", "0123456789abcde \t\r\n"}) {
      const auto message = error_of([&] { resolved(weak); });
      CHECK(message.find("DDPRUN_RDZV_SECRET: the secret is 15 bytes long") != std::string::npos);
    }
    CHECK(std::string(kSecretExpectation).find("head -c 32 /dev/urandom | base64") !=
          std::string::npos);
  }
  SECTION("a DDPRUN_RDZV_SECRET_FILE readable by others is refused, naming the variable") {
    const SecretFile loose("0123456789abcdef\n", 0644);
    const auto message = error_of(
        [&] { resolve_job_secret(std::nullopt, "--secret-file", loose.path(), std::nullopt); });
    CHECK(message.find("DDPRUN_RDZV_SECRET_FILE " + loose.path()) != std::string::npos);
    CHECK(message.find("mode 0644") != std::string::npos);
  }
}

TEST_CASE("the extension's requests decode the same in every generation", "[job_secret]") {
  const std::string proof(kAuthProofBytes, '\x5a');
  const std::string nonce(kAuthNonceBytes, '\x3c');
  for (const auto generation : {WireGeneration::g0, WireGeneration::g1, WireGeneration::g2}) {
    CAPTURE(generation_name(generation));
    const auto hello = decoded(auth_hello_request(nonce), generation);
    CHECK(hello.command == Command::auth_hello);
    CHECK(hello.values == std::vector<std::string>{nonce});
    const auto proof_request = decoded(auth_proof_request(proof), generation);
    CHECK(proof_request.command == Command::auth_proof);
    REQUIRE(proof_request.values.size() == 1);
    CHECK(proof_request.values.front() == proof);
    // The opcodes are outside every PyTorch generation's own range.
    CHECK(opcode_for_command(generation, Command::auth_hello) == kAuthHelloOpcode);
    CHECK(command_for_opcode(generation, kAuthHelloOpcode - 1) == std::nullopt);
  }
}

TEST_CASE("truncated and malformed extension requests", "[job_secret]") {
  const StoreLimits limits;
  SECTION("a truncated request asks for exactly the missing bytes, never more") {
    for (const std::string& full : {auth_proof_request(std::string(kAuthProofBytes, 'p')),
                                    auth_hello_request(std::string(kAuthNonceBytes, 'n'))}) {
      for (std::size_t size = 1; size < full.size(); ++size) {
        const auto result =
            decode_request(bytes_of(full.substr(0, size)), WireGeneration::g2, limits);
        REQUIRE(result.status == DecodeStatus::need_more);
        CHECK(result.min_bytes == (size == 1 && full[0] == '\xd0' ? 2 : full.size()));
      }
    }
  }
  SECTION("an unknown version is invalid, naming it; so is version 1 (one-sided, older)") {
    for (const char* bytes : {"d0 07", "d0 01"}) {
      const auto result = decode_request(bytes_of(hex(bytes)), WireGeneration::g2, limits);
      REQUIRE(result.status == DecodeStatus::invalid);
      CHECK(result.error.find("AUTH_HELLO: version " + std::string(1, bytes[4])) !=
            std::string::npos);
    }
  }
  SECTION("opcodes near the extension's are unknown") {
    for (const char* bytes : {"cf 01", "d2 01", "ff 01"}) {
      CHECK(decode_request(bytes_of(hex(bytes)), WireGeneration::g2, limits).status ==
            DecodeStatus::invalid);
    }
  }
  SECTION("a request still arriving names its first key once it is in, before its value") {
    const std::string key = "ddprun/rdzv/job/round";
    std::string set(1, static_cast<char>(*opcode_for_command(WireGeneration::g2, Command::set)));
    set += std::string(1, static_cast<char>(key.size())) + std::string(7, '\0') + key;
    set += std::string(1, '\0') + std::string(2, '\0') + std::string(1, '\x01') +
           std::string(4, '\0');  // a value of 16 MiB, none of it sent
    const auto partial = decode_request(bytes_of(set), WireGeneration::g2, limits);
    // 16 MiB is over the 8 MiB limit: invalid at once, before any of it is buffered.
    CHECK(partial.status == DecodeStatus::invalid);
    const auto shorter =
        decode_request(bytes_of(set.substr(0, 1 + 8 + key.size() - 1)), WireGeneration::g2, limits);
    REQUIRE(shorter.status == DecodeStatus::need_more);
    CHECK_FALSE(shorter.first_key);
    std::string with_small_value = set.substr(0, 1 + 8 + key.size());
    with_small_value += std::string(1, '\x10') + std::string(7, '\0') + "abc";
    const auto keyed = decode_request(bytes_of(with_small_value), WireGeneration::g2, limits);
    REQUIRE(keyed.status == DecodeStatus::need_more);
    CHECK(keyed.request.command == Command::set);
    CHECK(keyed.first_key == key);
  }
}

namespace {

Request proof_of(std::string proof) {
  Request request;
  request.command = Command::auth_proof;
  request.values.push_back(std::move(proof));
  return request;
}

Request hello_with(std::string agent_nonce) {
  Request request;
  request.command = Command::auth_hello;
  request.values.push_back(std::move(agent_nonce));
  return request;
}

}  // namespace

TEST_CASE("the gate: challenge, proof, and the agents' keys", "[job_secret]") {
  const std::string secret = "job-secret-0123456789";
  const std::string agent_nonce(kAuthNonceBytes, '\x11');
  const std::string store_nonce(kAuthNonceBytes, '\x22');
  const Request hello = hello_with(agent_nonce);
  Request agent_set;
  agent_set.command = Command::set;
  agent_set.keys = {"ddprun/rdzv/job/round"};
  agent_set.values = {"junk"};
  Request worker_set;
  worker_set.command = Command::set;
  worker_set.keys = {"/default_pg/0//cuda//0"};
  worker_set.values = {"v"};
  Request mixed_check;
  mixed_check.command = Command::check;
  mixed_check.keys = {"/a", "ddprun/rdzv/job/x"};
  const std::string challenge_reply = std::string(1, static_cast<char>(kAuthChallenge)) +
                                      store_nonce + store_proof(secret, agent_nonce, store_nonce);

  SECTION("without a secret everything is allowed and HELLO says so") {
    AuthGate gate("");
    CHECK_FALSE(gate.refusal(agent_set));
    const auto answer = gate.answer(hello, "");
    CHECK(answer.reply == std::string(1, static_cast<char>(kAuthNotRequired)));
    CHECK_FALSE(answer.close_reason);
  }
  SECTION("before the proof: PyTorch's keys only") {
    AuthGate gate(secret);
    CHECK_FALSE(gate.refusal(worker_set));
    // TCPStore's own bookkeeping key, which wait_for_workers counts without the "/" prefix.
    Request init_add;
    init_add.command = Command::add;
    init_add.keys = {"init/"};
    CHECK_FALSE(gate.refusal(init_add));
    REQUIRE(gate.refusal(agent_set));
    CHECK(gate.refusal(agent_set)->find("ddprun/rdzv/job/round") != std::string::npos);
    CHECK(gate.refusal(mixed_check));
    // A request still arriving is judged by its first key.
    CHECK(gate.refusal(Command::set, std::string_view("ddprun/x")));
    CHECK_FALSE(gate.refusal(Command::set, std::string_view("/x")));
    CHECK_FALSE(gate.refusal(Command::set, std::nullopt));
  }
  SECTION("the store proves the secret first, over both nonces; the agent's proof opens") {
    AuthGate gate(secret);
    const auto challenge = gate.answer(hello, store_nonce);
    CHECK(challenge.reply == challenge_reply);
    CHECK(gate.proving());
    const auto verdict = gate.answer(proof_of(agent_proof(secret, store_nonce, agent_nonce)), "");
    CHECK(verdict.reply == std::string(1, static_cast<char>(kAuthAccepted)));
    CHECK_FALSE(verdict.close_reason);
    CHECK(gate.authenticated());
    CHECK_FALSE(gate.refusal(agent_set));
    CHECK(gate.answer(hello, store_nonce).close_reason);  // no second handshake
  }
  SECTION("while proving, only PING and the proof may come") {
    AuthGate gate(secret);
    gate.answer(hello, store_nonce);
    CHECK(gate.refusal(worker_set));
    CHECK(gate.refusal(Command::get_num_keys, std::nullopt));
    CHECK_FALSE(gate.refusal(Command::ping, std::nullopt));
    CHECK_FALSE(gate.refusal(Command::auth_proof, std::nullopt));
  }
  SECTION("a wrong proof is refused and closes") {
    AuthGate gate(secret);
    gate.answer(hello, store_nonce);
    const auto verdict =
        gate.answer(proof_of(agent_proof("other-secret-0123456", store_nonce, agent_nonce)), "");
    CHECK(verdict.reply == std::string(1, static_cast<char>(kAuthRefused)));
    REQUIRE(verdict.close_reason);
    CHECK(verdict.close_reason->find("wrong job secret") != std::string::npos);
    CHECK(gate.refusal(agent_set));
  }
  SECTION("the store's own proof reflected back is refused") {
    AuthGate gate(secret);
    gate.answer(hello, store_nonce);
    CHECK(gate.answer(proof_of(store_proof(secret, agent_nonce, store_nonce)), "").close_reason);
  }
  SECTION("a proof without a challenge, replayed, or for another challenge is refused") {
    AuthGate gate(secret);
    CHECK(gate.answer(proof_of(agent_proof(secret, store_nonce, agent_nonce)), "").close_reason);
    AuthGate fresh(secret);
    fresh.answer(hello, std::string(kAuthNonceBytes, '\x33'));
    // A proof recorded for another challenge is worth nothing.
    CHECK(fresh.answer(proof_of(agent_proof(secret, store_nonce, agent_nonce)), "").close_reason);
  }
  SECTION("a HELLO without a nonce, or a store nonce equal to the agent's, makes no challenge") {
    AuthGate gate(secret);
    Request bare;
    bare.command = Command::auth_hello;
    CHECK(gate.answer(bare, store_nonce).close_reason);
    AuthGate echo(secret);
    CHECK(echo.answer(hello, agent_nonce).close_reason);
  }
}

TEST_CASE("the agent believes only a store that proves the secret", "[job_secret]") {
  const std::string secret = "job-secret-0123456789";
  const std::string agent_nonce(kAuthNonceBytes, '\x11');
  const std::string store_nonce(kAuthNonceBytes, '\x22');
  const auto challenge = [&](std::string_view proof) { return store_nonce + std::string(proof); };

  SECTION("the right store proof: the agent's proof, which the store's gate accepts") {
    const auto answer =
        answer_store_challenge(secret, agent_nonce, kAuthChallenge,
                               challenge(store_proof(secret, agent_nonce, store_nonce)));
    REQUIRE_FALSE(answer.refusal);
    CHECK(answer.proof_request ==
          auth_proof_request(agent_proof(secret, store_nonce, agent_nonce)));
    AuthGate gate(secret);
    gate.answer(hello_with(agent_nonce), store_nonce);
    const auto decoded_proof =
        decode_request(bytes_of(answer.proof_request), WireGeneration::g2, StoreLimits{});
    CHECK_FALSE(gate.answer(decoded_proof.request, "").close_reason);
  }
  SECTION("a store that needs no secret is not believed") {
    const auto answer = answer_store_challenge(secret, agent_nonce, kAuthNotRequired, "");
    REQUIRE(answer.refusal);
    CHECK(answer.refusal->find("does not know the job secret") != std::string::npos);
    CHECK(answer.refusal->find("Another process may hold the port") != std::string::npos);
    CHECK(answer.proof_request.empty());
  }
  SECTION("wrong proofs: another secret, another nonce, all zeros, reflected, cut short") {
    for (const std::string& proof :
         {store_proof("other-secret-0123456", agent_nonce, store_nonce),
          store_proof(secret, std::string(kAuthNonceBytes, '\x44'), store_nonce),
          std::string(kAuthProofBytes, '\0'), agent_proof(secret, store_nonce, agent_nonce),
          store_proof(secret, agent_nonce, store_nonce).substr(1)}) {
      const auto answer =
          answer_store_challenge(secret, agent_nonce, kAuthChallenge, challenge(proof));
      REQUIRE(answer.refusal);
      CHECK(answer.refusal->find("its proof of it is wrong") != std::string::npos);
      CHECK(answer.proof_request.empty());
    }
  }
  SECTION("a store that echoes the agent's nonce as its own is not believed") {
    const auto answer =
        answer_store_challenge(secret, agent_nonce, kAuthChallenge,
                               agent_nonce + store_proof(secret, agent_nonce, agent_nonce));
    CHECK(answer.refusal);
  }
  SECTION("an unknown status is not believed") {
    CHECK(answer_store_challenge(secret, agent_nonce, 7,
                                 challenge(store_proof(secret, agent_nonce, store_nonce)))
              .refusal);
  }
}

TEST_CASE("nonces and ids come fresh from the kernel, in the shape asked for", "[job_secret]") {
  using namespace ddprun::common;
  const std::string first = random_bytes(kAuthNonceBytes);
  CHECK(first.size() == kAuthNonceBytes);
  CHECK(first != random_bytes(kAuthNonceBytes));
  const std::string hex_id = random_hex(8);
  CHECK(hex_id.size() == 16);
  CHECK(hex_id.find_first_not_of("0123456789abcdef") == std::string::npos);
  const std::string uuid = random_uuid4();
  REQUIRE(uuid.size() == 36);
  for (const std::size_t dash : {8, 13, 18, 23}) {
    CHECK(uuid[dash] == '-');
  }
  CHECK(uuid[14] == '4');                                          // version 4
  CHECK(std::string("89ab").find(uuid[19]) != std::string::npos);  // RFC 4122 variant
  CHECK(uuid != random_uuid4());
}
