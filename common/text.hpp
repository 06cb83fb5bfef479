#pragma once
// Small text helpers every component shares.

#include <cctype>
#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>
#include <system_error>

namespace ddprun::common {

// The text without the blanks (spaces, tabs, line ends) around it.
inline std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && blank(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && blank(text.back()))
    text.remove_suffix(1);
  return text;
}

// The whole text as a decimal Integer; nothing for an empty text, any character that does not
// belong, or a value out of Integer's range.
template <typename Integer>
std::optional<Integer> parse_integer(std::string_view text) {
  Integer value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

// Walks a text line by line: '\n' ends a line, the last one may lack it.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}

  // The next line without its '\n'; nothing at the end of the text.
  std::optional<std::string_view> next() {
    if (next_ >= text_.size()) {
      return std::nullopt;
    }
    start_ = next_;
    std::size_t end = text_.find('\n', start_);
    if (end == std::string_view::npos) {
      end = text_.size();
    }
    next_ = end + 1;
    return text_.substr(start_, end - start_);
  }
  // Where the line next() returned last starts, and where the one after it starts (at most the
  // text's size).
  std::size_t line_start() const { return start_; }
  std::size_t rest_start() const { return next_ < text_.size() ? next_ : text_.size(); }

 private:
  std::string_view text_;
  std::size_t start_ = 0;
  std::size_t next_ = 0;
};

}  // namespace ddprun::common
