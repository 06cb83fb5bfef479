#pragma once
// Console line prefixes for --tee'd worker output (torchrun's "[default0]:" header), the
// prefixer that applies them without holding anything back, and the line splitter behind
// --duplicate-*-filters. Pure: the output pump and the console feed bytes in and write what
// comes out.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

// Puts the prefix in front of every line of a byte stream and returns the text at once: a
// partial line (a prompt, output without a newline) is shown as soon as it arrives, not when
// its newline comes. '\r' starts a line too ("\r\n" counts once), so a carriage-return progress
// bar (tqdm) redraws in place with its prefix instead of overwriting it. torchrun's tail of
// the tee file shows partial lines as well, but turns every '\r' into a new line.
class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // The bytes with the prefix inserted before the first byte of each line.
  std::string feed(std::string_view bytes);

  // True when the text written so far leaves a line with content and no '\n' yet (after a
  // partial line, or a progress bar's "\r 10%").
  bool line_open() const { return line_open_; }

  // Ends the open line: "\n" when line_open(), else "". The next byte gets the prefix again.
  // Used when the stream ends, and before another worker writes to the same console.
  std::string end_line();

 private:
  std::string prefix_;
  bool at_line_start_ = true;
  bool after_carriage_return_ = false;
  bool line_open_ = false;
};

// Splits a byte stream into lines as Python's universal newlines do ('\n', '\r' and "\r\n" end
// a line), for --duplicate-*-filters, which match and copy whole lines. A line longer than
// max_line is cut there, to bound memory.
class LineSplitter {
 public:
  static constexpr std::size_t kMaxLine = 64 * 1024;

  explicit LineSplitter(std::size_t max_line = kMaxLine) : max_line_(max_line) {}

  // The lines completed by these bytes, without their terminators.
  std::vector<std::string> feed(std::string_view bytes);
  // The stream ended: the unterminated rest as a last line, if there is one.
  std::vector<std::string> finish();

 private:
  std::size_t max_line_;
  std::string pending_;
  bool after_carriage_return_ = false;
};

}  // namespace ddprun::agent
