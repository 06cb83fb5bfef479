// Base64 for etcd's JSON gateway: encoding of keys and values, strict decoding of replies.

#include "rendezvous/backends/etcd/base64.hpp"

#include <array>
#include <cstdint>

namespace ddprun::rendezvous::backends::etcd {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::uint8_t kInvalid = 0xff;

constexpr std::array<std::uint8_t, 256> make_decode_table() {
  std::array<std::uint8_t, 256> table{};
  for (auto& entry : table) {
    entry = kInvalid;
  }
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::uint8_t>(i);
  }
  return table;
}
constexpr auto kDecode = make_decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t group =
        (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16) |
        (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8) |
        static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += kAlphabet[(group >> 6) & 63];
    out += kAlphabet[group & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t group = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) {
      group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    }
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += rest == 2 ? kAlphabet[(group >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t padding =
        last ? static_cast<std::size_t>(text[i + 3] == '=') + (text[i + 2] == '=' ? 1 : 0) : 0;
    if (padding == 1 && text[i + 2] == '=') {
      return std::nullopt;  // "x=y=" style
    }
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      std::uint8_t sextet = 0;
      if (j >= 4 - padding) {
        sextet = 0;  // a padding position
      } else {
        sextet = kDecode[static_cast<unsigned char>(c)];
        if (sextet == kInvalid) {
          return std::nullopt;
        }
      }
      group = (group << 6) | sextet;
    }
    out += static_cast<char>((group >> 16) & 0xff);
    if (padding < 2) {
      out += static_cast<char>((group >> 8) & 0xff);
    }
    if (padding < 1) {
      out += static_cast<char>(group & 0xff);
    }
  }
  return out;
}

}  // namespace ddprun::rendezvous::backends::etcd
