#include "common/host_port.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace ddprun::common {
namespace {

bool is_name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

std::uint16_t parse_port(std::string_view text) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool digits_only =
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (text.empty() || text.size() > 5 || !digits_only || error != std::errc() ||
      end != text.data() + text.size() || value > 65535) {
    throw std::invalid_argument("bad port '" + std::string(text) + "' (expected 0-65535)");
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

HostPort parse_host_port(std::string_view text) {
  HostPort result;
  std::string_view host = text;
  std::optional<std::string_view> port;
  const bool bracketed = text.starts_with('[');
  if (bracketed) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) {
      throw std::invalid_argument("an unclosed '['");
    }
    host = text.substr(1, close - 1);
    const auto rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      throw std::invalid_argument("text after ']' that is not :PORT");
    }
    if (!rest.empty()) {
      port = rest.substr(1);
    }
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      // torchrun would read "::1" as host ":" and port 1; say what was meant instead.
      throw std::invalid_argument("an IPv6 address without brackets (write [::1]:29400)");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) {
    throw std::invalid_argument("no host");
  }
  const bool valid = std::all_of(host.begin(), host.end(), [bracketed](char c) {
    return is_name_character(c) || (bracketed && c == ':');
  });
  if (!valid) {
    throw std::invalid_argument("a character that is not allowed in the host '" +
                                std::string(host) + "'");
  }
  result.host = std::string(host);
  if (port) {
    result.port = parse_port(*port);
  }
  return result;
}

}  // namespace ddprun::common
