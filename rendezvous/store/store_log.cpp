#include "rendezvous/store/store_log.hpp"

#include <unistd.h>

#include <string>

namespace ddprun::rendezvous::store {

std::optional<StoreLogLevel> parse_log_level(std::string_view name) {
  if (name == "quiet") {
    return StoreLogLevel::quiet;
  }
  if (name == "error") {
    return StoreLogLevel::error;
  }
  if (name == "warning") {
    return StoreLogLevel::warning;
  }
  if (name == "info") {
    return StoreLogLevel::info;
  }
  if (name == "debug") {
    return StoreLogLevel::debug;
  }
  return std::nullopt;
}

void store_log(StoreLogLevel threshold, StoreLogLevel level, std::string_view message) {
  if (level > threshold || level == StoreLogLevel::quiet) {
    return;
  }
  static constexpr std::string_view kNames[] = {"", "error", "warning", "info", "debug"};
  std::string line = "ddprun-store ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line += message;
  line += '\n';
  // A failed diagnostic write has nowhere to be reported.
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
}

std::string printable_key(std::string_view key) {
  constexpr std::size_t kShown = 64;
  std::string shown;
  for (const char c : key.substr(0, kShown)) {
    shown.push_back(c >= 0x20 && c < 0x7F ? c : '?');
  }
  return key.size() > kShown ? shown + "..." : shown;
}

}  // namespace ddprun::rendezvous::store
