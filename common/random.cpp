#include "common/random.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace ddprun::common {
namespace {

constexpr std::string_view kHexDigits = "0123456789abcdef";

void append_hex(std::string& text, unsigned char byte) {
  text += kHexDigits[byte >> 4];
  text += kHexDigits[byte & 0x0fU];
}

}  // namespace

std::string random_bytes(std::size_t count) {
  std::string bytes(count, '\0');
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      throw std::runtime_error(std::string("cannot read random bytes (getrandom): ") +
                               std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  return bytes;
}

std::string random_hex(std::size_t bytes) {
  std::string text;
  text.reserve(2 * bytes);
  for (const char byte : random_bytes(bytes)) {
    append_hex(text, static_cast<unsigned char>(byte));
  }
  return text;
}

std::string random_uuid4() {
  std::string bytes = random_bytes(16);
  bytes[6] = static_cast<char>((static_cast<unsigned char>(bytes[6]) & 0x0fU) | 0x40U);  // v4
  bytes[8] = static_cast<char>((static_cast<unsigned char>(bytes[8]) & 0x3fU) | 0x80U);  // RFC
  std::string text;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      text += '-';
    }
    append_hex(text, static_cast<unsigned char>(bytes[i]));
  }
  return text;
}

}  // namespace ddprun::common
