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
    throw RendezvousError("--rdzv_conf " + key + "=" + text +
                          ": expected a positive number of seconds");
  }
  return value;
}

int parse_count(const std::string& key, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || value < 1 || value > 1000000) {
    throw RendezvousError("--rdzv_conf " + key + "=" + text + ": expected a positive integer");
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
  throw RendezvousError("--rdzv_conf " + key + "=" + text + ": expected a boolean (1/0)");
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
