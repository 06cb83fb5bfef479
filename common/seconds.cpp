#include "common/seconds.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "common/text.hpp"

namespace ddprun::common {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Skips the digits at `at`; returns how many there were.
std::size_t skip_digits(std::string_view text, std::size_t& at) {
  const std::size_t start = at;
  while (at < text.size() && is_digit(text[at]))
    ++at;
  return at - start;
}

// -?digits[.digits][e[+-]digits], with digits on at least one side of the point: what
// std::from_chars accepts for a plain decimal, without its "inf", "nan" or hexadecimal.
bool is_decimal(std::string_view text) {
  std::size_t at = text.starts_with('-') ? 1 : 0;
  std::size_t mantissa_digits = skip_digits(text, at);
  if (at < text.size() && text[at] == '.') {
    ++at;
    mantissa_digits += skip_digits(text, at);
  }
  if (mantissa_digits == 0)
    return false;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-'))
      ++at;
    if (skip_digits(text, at) == 0)
      return false;
  }
  return at == text.size();
}

}  // namespace

std::variant<Seconds, SecondsProblem> parse_seconds(std::string_view text, bool zero_allowed) {
  const std::string_view number = trim(text);
  if (!is_decimal(number))
    return SecondsProblem::kNotANumber;
  // strtod rather than std::from_chars: the C++ runtime's floating-point from_chars calls
  // fesetround, which makes ddprun map libm (0.3 MiB of the agent's RSS) for nothing else.
  // ddprun never calls setlocale, so strtod reads the C locale's decimal point.
  const std::string copy(number);
  errno = 0;
  const double value = std::strtod(copy.c_str(), nullptr);
  if (errno == ERANGE || !std::isfinite(value) || value < 0 || (value == 0 && !zero_allowed) ||
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

std::string seconds_text(Seconds seconds) {
  std::string text = std::to_string(seconds.count());
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.')
    text.pop_back();
  return text;
}

}  // namespace ddprun::common
