#pragma once
// One-line diagnostics of the store to standard error, filtered by level.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::store {

enum class StoreLogLevel : std::uint8_t { quiet, error, warning, info, debug };

std::optional<StoreLogLevel> parse_log_level(std::string_view name);

// Writes "ddprun-store <LEVEL>: message\n" with one write, so lines from threads do not mix.
void store_log(StoreLogLevel threshold, StoreLogLevel level, std::string_view message);

// A key as a log line shows it: printable ASCII kept, anything else as '?', at most 64 bytes.
std::string printable_key(std::string_view key);

}  // namespace ddprun::rendezvous::store
