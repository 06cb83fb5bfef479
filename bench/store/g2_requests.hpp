#pragma once
// Encoders for the few TCPStore G2 requests the load generator sends, built on the store's
// own wire codec and opcode table, and the shapes of their replies. Header-only, no I/O.

#include <cstdint>
#include <string>
#include <string_view>

#include "rendezvous/store/wire_codec.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::bench::store {

namespace wire = rendezvous::wire;
using rendezvous::store::Command;

// What a reply looks like on the wire, as the client must know it (replies carry no opcode).
enum class ReplyKind : std::uint8_t {
  echo,         // PING: the u32 nonce back
  value,        // GET: u64 length, then the bytes
  counter,      // ADD: the new value as i64
  wait_status,  // WAIT: one byte, STOP_WAITING
};

inline std::uint8_t g2_opcode(Command command) {
  // Every command used here exists in G2, so the lookup cannot fail.
  return *rendezvous::store::opcode_for_command(rendezvous::store::WireGeneration::g2, command);
}

// VALIDATE then PING, what a PyTorch >= 2.5 client sends first; the PING gets an echo.
inline void append_handshake(std::string& out, std::uint32_t nonce) {
  wire::append_u8(out, g2_opcode(Command::validate));
  wire::append_u32(out, rendezvous::store::kValidationMagic);
  wire::append_u8(out, g2_opcode(Command::ping));
  wire::append_u32(out, nonce);
}

inline void append_set(std::string& out, std::string_view key, std::string_view value) {
  wire::append_u8(out, g2_opcode(Command::set));
  wire::append_bytes(out, key);
  wire::append_bytes(out, value);
}

inline void append_get(std::string& out, std::string_view key) {
  wire::append_u8(out, g2_opcode(Command::get));
  wire::append_bytes(out, key);
}

inline void append_add(std::string& out, std::string_view key, std::int64_t delta) {
  wire::append_u8(out, g2_opcode(Command::add));
  wire::append_bytes(out, key);
  wire::append_i64(out, delta);
}

inline void append_wait(std::string& out, std::string_view key) {
  wire::append_u8(out, g2_opcode(Command::wait));
  wire::append_u64(out, 1);
  wire::append_bytes(out, key);
}

}  // namespace ddprun::bench::store
