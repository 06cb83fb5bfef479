#include "tests/rendezvous/store_client.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "common/random.hpp"
#include "rendezvous/store/deadline_socket.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/wire_codec.hpp"

namespace ddprun::rendezvous::store {
namespace {

using Clock = std::chrono::steady_clock;

// Reconnect backoff: exponential with jitter, like PyTorch's (a shorter start, since our
// peers are usually local and a restart of the store is quick).
constexpr auto kFirstBackoff = std::chrono::milliseconds(20);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);
constexpr double kBackoffFactor = 1.5;

class TcpStoreClient final : public StoreClient {
 public:
  explicit TcpStoreClient(const StoreClientOptions& options)
      : options_(options), jitter_(std::random_device{}()) {
    if (options_.wire != WireGeneration::g0 && options_.wire != WireGeneration::g1 &&
        options_.wire != WireGeneration::g2) {
      throw StoreError("unknown wire generation");
    }
    reconnect();
  }

  void set(std::string_view key, std::string_view value) override {
    run(true, [&] { send_keyed(Command::set, key, value); });
  }

  std::string get(std::string_view key) override { return get(key, options_.op_timeout); }

  std::string get(std::string_view key, std::chrono::milliseconds timeout) override {
    // As PyTorch's client: WAIT until the key exists, then GET it.
    if (!wait({std::string(key)}, timeout)) {
      throw StoreTimeout("timed out after " + std::to_string(timeout.count()) +
                         " ms waiting for key '" + std::string(key) + "'");
    }
    return run(true, [&] {
      std::string request;
      wire::append_u8(request, opcode(Command::get));
      wire::append_bytes(request, key);
      send(request);
      return read_bytes();
    });
  }

  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    return run(false, [&] {
      std::string request;
      wire::append_u8(request, opcode(Command::compare_set));
      wire::append_bytes(request, key);
      wire::append_bytes(request, expected);
      wire::append_bytes(request, desired);
      send(request);
      return read_bytes();
    });
  }

  int64_t add(std::string_view key, int64_t delta) override {
    return run(false, [&] {
      std::string request;
      wire::append_u8(request, opcode(Command::add));
      wire::append_bytes(request, key);
      wire::append_i64(request, delta);
      send(request);
      return read_i64();
    });
  }

  bool check(const std::vector<std::string>& keys) override {
    return run(true, [&] {
      send(keys_request(Command::check, keys));
      const auto status = read_u8();
      if (status != kCheckReady && status != kCheckNotReady) {
        throw SocketBroken("unexpected CHECK reply " + std::to_string(status));
      }
      return status == kCheckReady;
    });
  }

  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const Deadline deadline = Clock::now() + timeout;
    return run(true, [&] { return wait_until(keys, deadline); });
  }

  bool delete_key(std::string_view key) override {
    return run(true, [&] {
      std::string request;
      wire::append_u8(request, opcode(Command::delete_key));
      wire::append_bytes(request, key);
      send(request);
      return read_i64() == 1;
    });
  }

  int64_t num_keys() override {
    return run(true, [&] {
      std::string request;
      wire::append_u8(request, opcode(Command::get_num_keys));
      send(request);
      return read_i64();
    });
  }

  void append(std::string_view key, std::string_view value) override {
    if (options_.wire == WireGeneration::g0) {
      throw StoreError("APPEND needs a G1 or G2 server");
    }
    run(false, [&] { send_keyed(Command::append, key, value); });
  }

  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    if (!wait(keys, options_.op_timeout)) {
      throw StoreTimeout("timed out after " + std::to_string(options_.op_timeout.count()) +
                         " ms waiting for " + std::to_string(keys.size()) + " keys");
    }
    return run(true, [&] {
      std::vector<std::string> values;
      values.reserve(keys.size());
      if (options_.wire == WireGeneration::g0) {
        for (const auto& key : keys) {
          std::string request;
          wire::append_u8(request, opcode(Command::get));
          wire::append_bytes(request, key);
          send(request);
          values.push_back(read_bytes());
        }
        return values;
      }
      send(keys_request(Command::multi_get, keys));
      for (std::size_t i = 0; i < keys.size(); ++i) {
        values.push_back(read_bytes());
      }
      return values;
    });
  }

  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override {
    if (keys.size() != values.size()) {
      throw StoreError("multi_set: " + std::to_string(keys.size()) + " keys but " +
                       std::to_string(values.size()) + " values");
    }
    run(true, [&] {
      if (options_.wire == WireGeneration::g0) {
        for (std::size_t i = 0; i < keys.size(); ++i) {
          send_keyed(Command::set, keys[i], values[i]);
        }
        return;
      }
      send(wire::key_value_pairs_request(opcode(Command::multi_set), keys, values));
    });
  }

 private:
  // Runs one operation. A broken connection is replaced; idempotent operations are then
  // retried, others report the failure (their effect may or may not have happened).
  template <typename Operation>
  auto run(bool idempotent, Operation&& operation) -> decltype(operation()) {
    for (int attempt = 0;; ++attempt) {
      try {
        // Between requests nothing may be readable; if something is, the server closed the
        // connection (a request without reply, like SET, would otherwise vanish into it).
        if (socket_.is_stale()) {
          socket_.close();
          reconnect();
        }
        return operation();
      } catch (const SocketBroken& broken) {
        socket_.close();
        if (!idempotent || attempt >= options_.max_retries) {
          throw StoreError(std::string("store connection to ") + where() +
                           " broke: " + broken.what());
        }
      } catch (const SocketTimeout& timeout) {
        // A reply that stopped half-way leaves the stream out of step: start afresh.
        socket_.close();
        throw StoreUnresponsive(std::string("store at ") + where() +
                                " did not answer: " + timeout.what());
      }
    }
  }

  std::string where() const { return options_.host + ":" + std::to_string(options_.port); }

  void reconnect() {
    const Deadline deadline = Clock::now() + options_.connect_timeout;
    auto backoff = std::chrono::duration<double, std::milli>(kFirstBackoff);
    std::string last_error;
    bool last_timed_out = false;
    while (true) {
      try {
        socket_ = DeadlineSocket::connect(options_.host, options_.port, deadline);
        handshake(std::min(deadline, Clock::now() + options_.op_timeout));
        authenticate(std::min(deadline, Clock::now() + options_.op_timeout));
        return;
      } catch (const StoreAuthRefused&) {
        socket_.close();
        throw;
      } catch (const SocketTimeout& error) {
        socket_.close();
        last_error = error.what();
        last_timed_out = true;
      } catch (const std::runtime_error& error) {  // SocketBroken: refused, reset
        socket_.close();
        last_error = error.what();
        last_timed_out = false;
      }
      // Jittered delay in [0.5, 1.5] x backoff, never past the deadline.
      std::uniform_real_distribution<double> spread(0.5, 1.5);
      const auto delay =
          std::chrono::duration_cast<std::chrono::milliseconds>(backoff * spread(jitter_));
      if (Clock::now() + delay >= deadline) {
        const std::string message = "cannot connect to the store at " + where() + " within " +
                                    std::to_string(options_.connect_timeout.count()) +
                                    " ms: " + last_error;
        if (last_timed_out) {
          throw StoreUnresponsive(message);
        }
        throw StoreError(message);
      }
      std::this_thread::sleep_for(delay);
      backoff = std::min(backoff * kBackoffFactor,
                         std::chrono::duration<double, std::milli>(kMaxBackoff));
    }
  }

  void handshake(Deadline deadline) {
    if (options_.wire != WireGeneration::g2) {
      return;
    }
    const auto nonce = static_cast<std::uint32_t>(::getpid());
    std::string request;
    wire::append_u8(request, opcode(Command::validate));
    wire::append_u32(request, kValidationMagic);
    wire::append_u8(request, opcode(Command::ping));
    wire::append_u32(request, nonce);
    socket_.send_all(request, deadline);
    unsigned char echo[4];
    socket_.receive_exact(echo, sizeof(echo), deadline);
    if (wire::load_u32(echo) != nonce) {
      throw SocketBroken("PING answered with a different nonce");
    }
  }

  void authenticate(Deadline deadline) {
    if (options_.secret.empty()) {
      return;
    }
    const std::string nonce = common::random_bytes(kAuthNonceBytes);
    std::uint8_t status = 0;
    std::string challenge(kAuthChallengeBytes - 1, '\0');
    try {
      socket_.send_all(auth_hello_request(nonce), deadline);
      socket_.receive_exact(&status, 1, deadline);
      if (status == kAuthChallenge) {
        socket_.receive_exact(challenge.data(), challenge.size(), deadline);
      }
    } catch (const SocketBroken&) {
      throw StoreAuthRefused("the store at " + where() + " " + std::string(kStoreClosedAtHello));
    }
    const auto answer = answer_store_challenge(options_.secret, nonce, status, challenge);
    if (answer.refusal) {
      throw StoreAuthRefused("the store at " + where() + " " + std::string(*answer.refusal));
    }
    socket_.send_all(answer.proof_request, deadline);
    std::uint8_t verdict = kAuthRefused;
    try {
      socket_.receive_exact(&verdict, 1, deadline);
    } catch (const SocketBroken&) {
      verdict = kAuthRefused;  // the store closed before its verdict could be read
    }
    if (verdict != kAuthAccepted) {
      throw StoreAuthRefused("the store at " + where() + " refused this client: wrong job secret");
    }
  }

  bool wait_until(const std::vector<std::string>& keys, Deadline deadline) {
    send(keys_request(Command::wait, keys));
    if (!socket_.wait_readable(deadline)) {
      return cancel_wait();
    }
    const auto status = read_u8();
    if (status != kStopWaiting) {
      throw SocketBroken("unexpected WAIT reply " + std::to_string(status));
    }
    return true;
  }

  // The wait timed out. G0 cannot cancel: drop the connection, which drops the server's
  // registration, so no stray STOP_WAITING reaches a later request. G1/G2: CANCEL_WAIT.
  bool cancel_wait() {
    if (options_.wire == WireGeneration::g0) {
      socket_.close();
      return false;
    }
    std::string request;
    wire::append_u8(request, opcode(Command::cancel_wait));
    send(request);
    auto status = read_u8();
    if (status == kStopWaiting) {
      // The wait finished just as we cancelled; WAIT_CANCELED follows it.
      if (read_u8() != kWaitCanceled) {
        throw SocketBroken("CANCEL_WAIT not acknowledged");
      }
      return true;
    }
    if (status != kWaitCanceled) {
      throw SocketBroken("unexpected CANCEL_WAIT reply " + std::to_string(status));
    }
    return false;
  }

  std::uint8_t opcode(Command command) const {
    const auto code = opcode_for_command(options_.wire, command);
    if (!code) {
      throw StoreError(std::string(command_name(command)) + " does not exist in " +
                       std::string(generation_name(options_.wire)));
    }
    return *code;
  }

  std::string keys_request(Command command, const std::vector<std::string>& keys) const {
    std::string request;
    wire::append_u8(request, opcode(command));
    wire::append_u64(request, keys.size());
    for (const auto& key : keys) {
      wire::append_bytes(request, key);
    }
    return request;
  }

  void send_keyed(Command command, std::string_view key, std::string_view value) {
    std::string request;
    request.reserve(17 + key.size() + value.size());
    wire::append_u8(request, opcode(command));
    wire::append_bytes(request, key);
    wire::append_bytes(request, value);
    send(request);
  }

  Deadline reply_deadline() const { return Clock::now() + options_.op_timeout; }

  void send(std::string_view request) { socket_.send_all(request, reply_deadline()); }

  std::uint8_t read_u8() {
    std::uint8_t value = 0;
    socket_.receive_exact(&value, 1, reply_deadline());
    return value;
  }

  std::int64_t read_i64() {
    unsigned char bytes[8];
    socket_.receive_exact(bytes, sizeof(bytes), reply_deadline());
    return static_cast<std::int64_t>(wire::load_u64(bytes));
  }

  std::string read_bytes() {
    unsigned char header[8];
    socket_.receive_exact(header, sizeof(header), reply_deadline());
    const std::uint64_t length = wire::load_u64(header);
    if (length > options_.max_reply_bytes) {
      throw SocketBroken("reply of " + std::to_string(length) + " bytes exceeds the limit of " +
                         std::to_string(options_.max_reply_bytes));
    }
    std::string value(static_cast<std::size_t>(length), '\0');
    socket_.receive_exact(value.data(), value.size(), reply_deadline());
    return value;
  }

  StoreClientOptions options_;
  DeadlineSocket socket_;
  std::mt19937 jitter_;
};

}  // namespace

std::unique_ptr<StoreClient> StoreClient::connect(const StoreClientOptions& options) {
  return std::make_unique<TcpStoreClient>(options);
}

}  // namespace ddprun::rendezvous::store
