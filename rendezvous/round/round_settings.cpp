#include "rendezvous/round/round_settings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string_view>

#include "common/seconds.hpp"
#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {
namespace {

common::Seconds seconds_setting(const std::string& key, const std::string& text,
                                bool zero_allowed = false) {
  const auto parsed = common::parse_seconds(text, zero_allowed);
  if (const auto* seconds = std::get_if<common::Seconds>(&parsed))
    return *seconds;
  throw RdzvConfError(key, "'" + text + "' is not a number of seconds in range",
                      common::seconds_expected(zero_allowed));
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

// The keys whose values are seconds, and the setting each sets.
struct SecondsKey {
  std::string_view key;
  common::Seconds RdzvSettings::* field;
  bool zero_allowed;
};
constexpr SecondsKey kSecondsKeys[] = {
    {"join_timeout", &RdzvSettings::join_timeout, false},
    {"last_call_timeout", &RdzvSettings::last_call_timeout, true},
    {"close_timeout", &RdzvSettings::close_timeout, false},
    {"keep_alive_interval", &RdzvSettings::keep_alive_interval, false},
    {"heartbeat_timeout", &RdzvSettings::heartbeat_timeout, false},
    {"read_timeout", &RdzvSettings::read_timeout, false},
};

}  // namespace

RdzvSettings parse_rdzv_settings(const std::map<std::string, std::string>& rdzv_conf) {
  RdzvSettings settings;
  for (const auto& [key, value] : rdzv_conf) {
    const auto seconds = std::find_if(std::begin(kSecondsKeys), std::end(kSecondsKeys),
                                      [&](const SecondsKey& entry) { return key == entry.key; });
    if (seconds != std::end(kSecondsKeys)) {
      settings.*(seconds->field) = seconds_setting(key, value, seconds->zero_allowed);
    } else if (key == "keep_alive_max_attempt") {
      settings.keep_alive_max_attempt = parse_count(key, value);
    } else if (key == "is_host") {
      settings.is_host = parse_bool(key, value);
    }
  }
  return settings;
}

}  // namespace ddprun::rendezvous::round
