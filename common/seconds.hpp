#pragma once
// Durations as options and records write them: a number of seconds ("30", "0.5", "1e3"). One
// parser for every such value (the command line, PET_*, --rdzv_conf, records), so that a value
// means the same wherever it is given; from there on it is a std::chrono duration.

#include <chrono>
#include <string>
#include <string_view>
#include <variant>

namespace ddprun::common {

// Seconds as the configuration holds them: fractional, exact for what was written.
using Seconds = std::chrono::duration<double>;

// The largest duration any option takes (about 115 days): far beyond any timeout, and far from
// where a steady_clock deadline would overflow.
inline constexpr Seconds kMaxSeconds{1e7};

enum class SecondsProblem { kNotANumber, kOutOfRange };

// A decimal number, blanks around it ignored, from 0 (only when zero_allowed) to kMaxSeconds.
std::variant<Seconds, SecondsProblem> parse_seconds(std::string_view text, bool zero_allowed);

// What a caller's message says is expected: "a number of seconds greater than 0, at most 1e7".
std::string seconds_expected(bool zero_allowed);

// "30", "0.5": the number of seconds as a message shows it (six decimals at most).
std::string seconds_text(Seconds seconds);

// A steady-clock wait of that long; never negative.
std::chrono::steady_clock::duration steady(Seconds seconds);

}  // namespace ddprun::common
