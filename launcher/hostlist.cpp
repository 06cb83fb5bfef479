#include "launcher/hostlist.hpp"

#include <charconv>
#include <cstdint>

namespace ddprun::launcher {
namespace {

bool is_separator(char c) {
  return c == ',' || c == ' ' || c == '\t' || c == '\n';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  std::size_t width = 0;
};

// Reads the digits at `at` (advancing it); `base` is the offset of `text` in the expression.
uint64_t read_number(std::string_view text, std::size_t& at, std::size_t base) {
  const std::size_t start = at;
  while (at < text.size() && is_digit(text[at]))
    ++at;
  if (at == start)
    throw HostlistError("expected a number in brackets", base + start);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data() + start, text.data() + at, value);
  if (error != std::errc() || end != text.data() + at || value > UINT32_MAX) {
    throw HostlistError("number too large in brackets", base + start);
  }
  return value;
}

// The bracket contents `inner` (without [ and ]), starting at `base` in the expression.
std::vector<Range> parse_ranges(std::string_view inner, std::size_t base) {
  std::vector<Range> ranges;
  std::size_t at = 0;
  while (true) {
    Range range;
    const std::size_t start = at;
    range.lo = read_number(inner, at, base);
    range.width = at - start;
    range.hi = range.lo;
    if (at < inner.size() && inner[at] == '-') {
      ++at;
      range.hi = read_number(inner, at, base);
      if (range.lo > range.hi) {
        throw HostlistError("range starts above its end", base + start);
      }
    }
    if (range.hi - range.lo + 1 > kMaxHostlistHosts) {
      throw HostlistError("range holds more than 65536 hosts", base + start);
    }
    ranges.push_back(range);
    if (at == inner.size())
      return ranges;
    if (inner[at] != ',') {
      throw HostlistError(std::string("unexpected '") + inner[at] + "' in brackets", base + at);
    }
    ++at;
  }
}

std::string padded(uint64_t number, std::size_t width) {
  std::string digits = std::to_string(number);
  if (digits.size() < width)
    digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Expands one token (no separators outside brackets) at `base` into `hosts`.
void expand_token(std::string_view token, std::size_t base, std::vector<std::string>& hosts) {
  std::vector<std::string> partial{""};
  std::size_t at = 0;
  while (at < token.size()) {
    const auto open = token.find_first_of("[]", at);
    const std::string_view text =
        token.substr(at, open == std::string_view::npos ? open : open - at);
    for (auto& prefix : partial)
      prefix += text;
    if (open == std::string_view::npos)
      break;
    if (token[open] == ']')
      throw HostlistError("']' without '['", base + open);
    const auto close = token.find_first_of("[]", open + 1);
    if (close == std::string_view::npos)
      throw HostlistError("missing ']'", base + open);
    if (token[close] == '[')
      throw HostlistError("'[' inside brackets", base + close);
    if (close == open + 1)
      throw HostlistError("empty brackets", base + open);
    const auto ranges = parse_ranges(token.substr(open + 1, close - open - 1), base + open + 1);

    std::vector<std::string> next;
    for (const auto& prefix : partial) {
      for (const Range& range : ranges) {
        for (uint64_t n = range.lo; n <= range.hi; ++n) {
          if (hosts.size() + next.size() >= kMaxHostlistHosts) {
            throw HostlistError("expression expands to more than 65536 hosts", base + open);
          }
          next.push_back(prefix + padded(n, range.width));
        }
      }
    }
    partial = std::move(next);
    at = close + 1;
  }
  for (auto& host : partial)
    hosts.push_back(std::move(host));
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  std::vector<std::string> hosts;
  std::size_t at = 0;
  while (at < expression.size()) {
    if (is_separator(expression[at])) {
      ++at;  // empty tokens (",,", ", ") are skipped, as Slurm does
      continue;
    }
    // A token runs to the next separator outside brackets.
    std::size_t end = at;
    int depth = 0;
    while (end < expression.size() && (depth > 0 || !is_separator(expression[end]))) {
      if (expression[end] == '[')
        ++depth;
      if (expression[end] == ']')
        --depth;
      if (depth < 0)
        throw HostlistError("']' without '['", end);
      if (depth > 1)
        throw HostlistError("'[' inside brackets", end);
      ++end;
    }
    expand_token(expression.substr(at, end - at), at, hosts);
    at = end;
  }
  return hosts;
}

}  // namespace ddprun::launcher
