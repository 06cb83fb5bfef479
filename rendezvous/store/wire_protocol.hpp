#pragma once
// The TCPStore wire vocabulary shared by the decoder, the store state, the server and the
// client: generation-independent command names, the per-generation opcode numbers, reply
// codes and the G2 handshake magic. See shared/reference/tcpstore_protocol.md §3.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ddprun::rendezvous::store {

// G0: PyTorch <= 2.0 (no handshake, WATCH_KEY). G1: 2.1 (no handshake, APPEND..CANCEL_WAIT).
// G2: 2.2+ (VALIDATE first, every opcode one higher than G1, then PING, queues, ...).
enum class WireGeneration : std::uint8_t { g0, g1, g2 };

// What a request asks for, whatever number its generation gives it.
enum class Command : std::uint8_t {
  validate,
  set,
  compare_set,
  get,
  add,
  check,
  wait,
  get_num_keys,
  watch_key,
  delete_key,
  append,
  multi_get,
  multi_set,
  cancel_wait,
  ping,
  queue_push,
  queue_pop,
  queue_len,
  list_keys,
  barrier,
  // The job secret's extension (job_auth.hpp), the same opcodes in every generation.
  auth_hello,
  auth_proof,
};

// The command an opcode byte names in a generation; nullopt for an unknown opcode.
std::optional<Command> command_for_opcode(WireGeneration generation, std::uint8_t opcode);
// The opcode of a command in a generation; nullopt when that generation lacks it.
std::optional<std::uint8_t> opcode_for_command(WireGeneration generation, Command command);
std::string_view command_name(Command command);
std::string_view generation_name(WireGeneration generation);

// Every key, value and count on the wire is preceded by its length as a little-endian u64.
inline constexpr std::size_t kLengthFieldBytes = 8;

// The first message of every G2 connection: opcode 0 then this u32 (bytes 00 CE F7 85 3C).
inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

// CheckResponseType.
inline constexpr std::uint8_t kCheckReady = 0;
inline constexpr std::uint8_t kCheckNotReady = 1;
// WaitResponseType.
inline constexpr std::uint8_t kStopWaiting = 0;
inline constexpr std::uint8_t kWaitCanceled = 1;
// WatchResponseType (G0 callback connection).
inline constexpr std::uint8_t kWatchKeyUpdated = 0;
inline constexpr std::uint8_t kWatchKeyCreated = 1;
inline constexpr std::uint8_t kWatchKeyDeleted = 2;
inline constexpr std::uint8_t kWatchCallbackRegistered = 3;

}  // namespace ddprun::rendezvous::store
