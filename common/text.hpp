#pragma once
// Small text helpers every component shares.

#include <cctype>
#include <string_view>

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

}  // namespace ddprun::common
