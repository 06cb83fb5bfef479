#pragma once
// Console line prefixes for worker output and the line splitter that applies them. Pure:
// the output pump feeds bytes in and writes what comes out.

#include <cstddef>
#include <string>
#include <string_view>

namespace ddprun::agent {

// torchrun's default header, "[default0]:".
inline constexpr std::string_view kDefaultPrefixTemplate = "[${role_name}${local_rank}]:";

struct PrefixFields {
  std::string role_name;
  int rank = 0;
  int local_rank = 0;
  std::string hostname;
};

// Expands ${role_name}, ${rank}, ${local_rank} and ${hostname} (also the $name form, as
// Python's string.Template). Unknown placeholders are kept verbatim rather than failing.
std::string expand_prefix_template(std::string_view templ, const PrefixFields& fields);

// Turns a byte stream into prefixed lines. Partial lines are held until their newline
// arrives, so a line is never split across two prefixes; a line longer than max_line is
// emitted in pieces to bound memory.
class LinePrefixer {
 public:
  static constexpr std::size_t kMaxLine = 64 * 1024;

  explicit LinePrefixer(std::string prefix, std::size_t max_line = kMaxLine)
      : prefix_(std::move(prefix)), max_line_(max_line) {}

  // Returns the complete prefixed lines found so far (each ending in '\n').
  std::string feed(std::string_view bytes);
  // The stream ended: the held partial line, prefixed and terminated, or "".
  std::string finish();

 private:
  std::string prefix_;
  std::size_t max_line_;
  std::string pending_;
};

}  // namespace ddprun::agent
