#include "rendezvous/round/record_checks.hpp"

#include <algorithm>
#include <charconv>

namespace ddprun::rendezvous::round {
namespace {

constexpr std::size_t kMaxQuotedBytes = 96;
constexpr std::size_t kMaxShownValueBytes = 40;

bool printable(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte >= 0x20 && byte != 0x7f;
  });
}

std::string quoted(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxQuotedBytes; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(text[i]);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out + (text.size() > kMaxQuotedBytes ? "...'" : "'");
}

// Canonical decimal: digits only, no leading zero unless "0".
std::optional<uint64_t> parse_decimal(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text.front() == '0')) {
    return std::nullopt;
  }
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

CorruptRecord::CorruptRecord(const std::string& key, const std::string& problem)
    : RendezvousError(corrupt_key_text(key, problem)) {}

std::string corrupt_key_text(std::string_view key, std::string_view problem) {
  return "the key " + quoted(key) + " is corrupt: " + std::string(problem);
}

std::string corrupt_rendezvous_message(std::string_view run_id, std::string_view corrupt_key) {
  return "rendezvous " + quoted(run_id) + ": " + std::string(corrupt_key) +
         "; another process wrote into this rendezvous (a stale job with the same --rdzv_id, or "
         "someone else on the network): stopping";
}

std::string shown_value(std::string_view value) {
  if (value.empty()) {
    return "an empty value";
  }
  const bool ascii = std::all_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (value.size() <= kMaxShownValueBytes && ascii) {
    return quoted(value);
  }
  return std::to_string(value.size()) + " bytes";
}

int64_t checked_counter(int64_t value, int64_t lo, int64_t hi, const std::string& key,
                        const char* what) {
  if (value < lo || value > hi) {
    throw CorruptRecord(key, "the counter holds " + std::to_string(value) + ", outside " +
                                 std::to_string(lo) + ".." + std::to_string(hi) + " " + what);
  }
  return value;
}

int parse_count(std::string_view text, int lo, int hi, const std::string& key, const char* what) {
  const auto value = parse_decimal(text);
  if (!value) {
    throw CorruptRecord(key, "holds " + shown_value(text) + ", not a count of " + what);
  }
  if (*value < static_cast<uint64_t>(std::max(lo, 0)) || *value > static_cast<uint64_t>(hi)) {
    throw CorruptRecord(key, "holds " + std::to_string(*value) + ", outside " + std::to_string(lo) +
                                 ".." + std::to_string(hi) + " " + what);
  }
  return static_cast<int>(*value);
}

uint64_t parse_round_number(const std::optional<std::string>& text, const std::string& key) {
  if (!text) {
    throw CorruptRecord(key, "the round number vanished");
  }
  const auto value = parse_decimal(*text);
  if (!value || *value > kMaxRound) {
    throw CorruptRecord(key, "holds " + shown_value(*text) + ", not a round number");
  }
  return *value;
}

NnodesText parse_nnodes_text(std::string_view text, const std::string& key) {
  const auto colon = text.find(':');
  const auto bad = [&]() {
    return CorruptRecord(key, "holds " + shown_value(text) + ", not --nnodes");
  };
  const auto lo = parse_decimal(text.substr(0, colon));
  const auto hi = colon == std::string_view::npos ? lo : parse_decimal(text.substr(colon + 1));
  if (!lo || !hi || *lo < 1 || *lo > *hi || *hi > static_cast<uint64_t>(kMaxCount) ||
      (colon != std::string_view::npos && *lo == *hi)) {
    throw bad();
  }
  return NnodesText{static_cast<int>(*lo), static_cast<int>(*hi)};
}

std::string published_error(std::string_view message, const std::string& key) {
  if (message.empty() || message.size() > kMaxPublishedErrorBytes || !printable(message)) {
    throw CorruptRecord(key, "holds an error message of " + shown_value(message) + " (at most " +
                                 std::to_string(kMaxPublishedErrorBytes) + " printable bytes)");
  }
  return std::string(message);
}

void check_token(const std::optional<std::string>& value, const std::string& key) {
  if (value && (value->empty() || value->size() > kMaxTokenBytes || !printable(*value))) {
    throw CorruptRecord(key, "holds " + shown_value(*value) + ", not an agent's claim");
  }
}

}  // namespace ddprun::rendezvous::round
