#pragma once
// A cheap text accumulator for state digests (the model checker builds millions of them):
// numbers through std::to_chars, no streams.

#include <bit>
#include <charconv>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "rendezvous/round/machine_time.hpp"

namespace ddprun::rendezvous::round {

class DigestText {
 public:
  DigestText() { text_.reserve(512); }
  DigestText& operator<<(std::string_view s) {
    text_.append(s);
    return *this;
  }
  DigestText& operator<<(char c) {
    text_.push_back(c);
    return *this;
  }
  DigestText& operator<<(bool b) {
    text_.push_back(b ? '1' : '0');
    return *this;
  }
  template <class Number>
    requires(std::integral<Number> && !std::same_as<Number, bool>)
  DigestText& operator<<(Number n) {
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, n);
    text_.append(buffer, ec == std::errc{} ? end : buffer);
    return *this;
  }
  // A time or a duration by its bit pattern: exact, and without the C++ runtime's
  // floating-point to_chars, whose rounding-mode calls make ddprun map libm (0.3 MiB of RSS).
  DigestText& operator<<(double d) { return *this << std::bit_cast<std::uint64_t>(d); }
  // A point in time as its seconds since the clock's epoch.
  DigestText& operator<<(MachineTime t) { return *this << t.time_since_epoch().count(); }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

}  // namespace ddprun::rendezvous::round
