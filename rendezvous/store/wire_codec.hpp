#pragma once
// Little-endian field encoders for TCPStore messages (every real deployment is
// little-endian and the protocol uses host order; tcpstore_protocol.md §1).

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::rendezvous::wire {

inline void append_u8(std::string& out, std::uint8_t value) {
  out.push_back(static_cast<char>(value));
}

inline void append_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
  }
}

inline void append_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
  }
}

inline void append_i64(std::string& out, std::int64_t value) {
  append_u64(out, static_cast<std::uint64_t>(value));
}

// A string or bytes field: u64 length, then the raw bytes.
inline void append_bytes(std::string& out, std::string_view bytes) {
  append_u64(out, bytes.size());
  out.append(bytes);
}

// MULTI_SET's body: the opcode, the number of pairs, then each key and its value. keys and values
// have the same size (the callers check).
inline std::string key_value_pairs_request(std::uint8_t opcode,
                                           const std::vector<std::string>& keys,
                                           const std::vector<std::string>& values) {
  std::string request;
  append_u8(request, opcode);
  append_u64(request, keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    append_bytes(request, keys[i]);
    append_bytes(request, values[i]);
  }
  return request;
}

// Reads an unsigned integer stored little-endian, as TCPStore writes them.
template <class Unsigned>
Unsigned load_le(const unsigned char* bytes) {
  Unsigned value = 0;
  for (int i = static_cast<int>(sizeof(Unsigned)) - 1; i >= 0; --i) {
    value = static_cast<Unsigned>((value << 8) | bytes[i]);
  }
  return value;
}

inline std::uint64_t load_u64(const unsigned char* bytes) {
  return load_le<std::uint64_t>(bytes);
}

inline std::uint32_t load_u32(const unsigned char* bytes) {
  return load_le<std::uint32_t>(bytes);
}

}  // namespace ddprun::rendezvous::wire
