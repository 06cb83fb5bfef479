#include "common/seconds.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/text.hpp"

namespace ddprun::common {

std::variant<Seconds, SecondsProblem> parse_seconds(std::string_view text, bool zero_allowed) {
  const std::string_view number = trim(text);
  double value = 0;
  const char* end = number.data() + number.size();
  const auto [stop, error] = std::from_chars(number.data(), end, value);
  if (number.empty() || error == std::errc::invalid_argument || stop != end)
    return SecondsProblem::kNotANumber;
  if (error != std::errc{} || !std::isfinite(value) || value < 0 || (value == 0 && !zero_allowed) ||
      Seconds(value) > kMaxSeconds)
    return SecondsProblem::kOutOfRange;
  return Seconds(value);
}

std::string seconds_expected(bool zero_allowed) {
  return zero_allowed ? "a number of seconds, 0 or more, at most 1e7"
                      : "a number of seconds greater than 0, at most 1e7";
}

std::chrono::steady_clock::duration steady(Seconds seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::clamp(seconds, Seconds::zero(), kMaxSeconds));
}

}  // namespace ddprun::common
