#include "rendezvous/round/round_settings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {
namespace {

double parse_seconds(const std::string& key, const std::string& text, bool zero_allowed = false) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || !std::isfinite(value) || value < 0 ||
      (value == 0 && !zero_allowed) || value > 1e7) {
    throw RdzvConfError(key, "'" + text + "' is not a number of seconds in range",
                        zero_allowed ? "a number of seconds, 0 to 1e7"
                                     : "a positive number of seconds, at most 1e7");
  }
  return value;
}

int parse_count(const std::string& key, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || value < 1 || value > 1000000) {
    throw RdzvConfError(key, "'" + text + "' is not a positive integer",
                        "an integer from 1 to 1000000");
  }
  return value;
}

bool parse_bool(const std::string& key, const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // The spellings torchrun's RendezvousParameters.get_as_bool accepts.
  if (lower == "1" || lower == "true" || lower == "t" || lower == "yes" || lower == "y") {
    return true;
  }
  if (lower == "0" || lower == "false" || lower == "f" || lower == "no" || lower == "n") {
    return false;
  }
  throw RdzvConfError(key, "'" + text + "' is not a boolean",
                      "1, true, t, yes, y or 0, false, f, no, n");
}

}  // namespace

RdzvSettings parse_rdzv_settings(const std::map<std::string, std::string>& rdzv_conf) {
  RdzvSettings settings;
  for (const auto& [key, value] : rdzv_conf) {
    if (key == "join_timeout") {
      settings.join_timeout_s = parse_seconds(key, value);
    } else if (key == "last_call_timeout") {
      settings.last_call_timeout_s = parse_seconds(key, value, /*zero_allowed=*/true);
    } else if (key == "close_timeout") {
      settings.close_timeout_s = parse_seconds(key, value);
    } else if (key == "keep_alive_interval") {
      settings.keep_alive_interval_s = parse_seconds(key, value);
    } else if (key == "keep_alive_max_attempt") {
      settings.keep_alive_max_attempt = parse_count(key, value);
    } else if (key == "heartbeat_timeout") {
      settings.heartbeat_timeout_s = parse_seconds(key, value);
    } else if (key == "read_timeout") {
      settings.read_timeout_s = parse_seconds(key, value);
    } else if (key == "is_host") {
      settings.is_host = parse_bool(key, value);
    }
  }
  return settings;
}

}  // namespace ddprun::rendezvous::round
