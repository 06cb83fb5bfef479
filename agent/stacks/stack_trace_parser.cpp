#include "agent/stacks/stack_trace_parser.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "agent/stacks/stack_capture_plan.hpp"
#include "common/text.hpp"

namespace ddprun::agent {

namespace {

using common::trim;

bool starts_with_space(std::string_view line) {
  return !line.empty() && (line.front() == ' ' || line.front() == '\t');
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos)
      break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// The position of the '(' that opens the parenthesized group ending text, or npos.
std::size_t opening_of_final_group(std::string_view text) {
  if (text.empty() || text.back() != ')')
    return std::string_view::npos;
  int depth = 0;
  for (std::size_t i = text.size(); i-- > 0;) {
    if (text[i] == ')') {
      ++depth;
    } else if (text[i] == '(' && --depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

bool is_python_location(std::string_view location) {
  const std::size_t colon = location.rfind(':');
  const std::string_view file = location.substr(0, colon);
  return (file.size() > 3 && file.substr(file.size() - 3) == ".py") || file.starts_with("<frozen");
}

std::optional<long long> leading_number(std::string_view text) {
  std::size_t i = 0;
  long long value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && i < 18) {
    value = value * 10 + (text[i] - '0');
    ++i;
  }
  if (i == 0)
    return std::nullopt;
  return value;
}

std::string basename_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// "file.c:48:7" -> "file.c:48" (eu-stack adds the column).
std::string without_column(std::string_view location) {
  const std::size_t last = location.rfind(':');
  if (last != std::string_view::npos && last > 0) {
    const std::size_t previous = location.rfind(':', last - 1);
    if (previous != std::string_view::npos &&
        leading_number(location.substr(previous + 1)).has_value() &&
        leading_number(location.substr(last + 1)).has_value())
      return std::string(location.substr(0, last));
  }
  return std::string(location);
}

// ---- py-spy ---------------------------------------------------------------------------------

// "Thread 21139 (idle): \"MainThread\"" or "Thread 0x7F12 (active)".
bool is_py_spy_main_header(std::string_view header, pid_t pid) {
  if (header.find("\"MainThread\"") != std::string_view::npos)
    return true;
  std::string_view id = header.substr(std::string_view("Thread ").size());
  return leading_number(id) == static_cast<long long>(pid) &&
         (id.size() == std::to_string(pid).size() || id[std::to_string(pid).size()] == ' ');
}

std::optional<StackFrame> parse_py_spy_frame(std::string_view line) {
  const std::string_view text = trim(line);
  const std::size_t open = opening_of_final_group(text);
  if (open == std::string_view::npos || open == 0)
    return std::nullopt;
  StackFrame frame;
  frame.function = std::string(trim(text.substr(0, open)));
  frame.location = std::string(text.substr(open + 1, text.size() - open - 2));
  frame.python = is_python_location(frame.location);
  return frame;
}

// ---- eu-stack and gdb -----------------------------------------------------------------------

// gdb: "func (args) at file:line", "func (args) from /lib/x.so", "func(sig) () from ...".
StackFrame parse_gdb_call(std::string_view text) {
  StackFrame frame;
  std::size_t cut = text.rfind(") at ");
  if (cut != std::string_view::npos) {
    frame.location = std::string(trim(text.substr(cut + 5)));
  } else if ((cut = text.rfind(") from ")) != std::string_view::npos) {
    frame.location = basename_of(trim(text.substr(cut + 7)));
  }
  if (cut != std::string_view::npos)
    text = text.substr(0, cut + 1);
  text = trim(text);
  const std::size_t open = opening_of_final_group(text);
  if (open != std::string_view::npos)
    text = trim(text.substr(0, open));
  frame.function = text.empty() ? "??" : std::string(text);
  return frame;
}

// eu-stack: "name@GLIBC_2.2.5 - /lib/libc.so.6" (the module part with -m).
StackFrame parse_eu_stack_call(std::string_view text) {
  StackFrame frame;
  std::size_t module = std::string_view::npos;
  if (text.starts_with("- ")) {  // no symbol, only the module
    frame.location = basename_of(trim(text.substr(2)));
    text = {};
  } else if ((module = text.rfind(" - ")) != std::string_view::npos) {
    frame.location = basename_of(trim(text.substr(module + 3)));
    text = text.substr(0, module);
  }
  text = trim(text);
  if (const std::size_t at = text.find('@'); at != std::string_view::npos && at > 0)
    text = text.substr(0, at);  // the symbol version is noise in a report
  frame.function = text.empty() ? "??" : std::string(text);
  return frame;
}

// One "#N ..." line of either tool.
std::optional<StackFrame> parse_native_frame(std::string_view line) {
  std::string_view text = trim(line);
  if (!text.starts_with('#') || !leading_number(text.substr(1)))
    return std::nullopt;
  const std::size_t after_number = text.find_first_of(" \t");
  if (after_number == std::string_view::npos)
    return StackFrame{"??", "", false};
  text = trim(text.substr(after_number));
  if (text.starts_with("0x")) {
    const std::size_t end = text.find_first_of(" \t");
    text = end == std::string_view::npos ? std::string_view() : trim(text.substr(end));
    if (text.starts_with("in "))
      return parse_gdb_call(text.substr(3));
    if (text.starts_with("- 1 "))  // eu-stack marks a return address it adjusted
      text = text.substr(4);
    return parse_eu_stack_call(text);
  }
  return parse_gdb_call(text);  // gdb omits the address where the pc starts a line
}

// "TID 123:" (eu-stack) or "Thread 1 (Thread 0x7f (LWP 123) \"python\"):" / "Thread 1 (process
// 123):" (gdb). nullopt: not a thread header; otherwise whether it is the main thread.
std::optional<bool> native_thread_header(std::string_view line, pid_t pid) {
  const std::string id = std::to_string(pid);
  if (line.starts_with("TID ")) {
    return leading_number(line.substr(4)) == static_cast<long long>(pid) &&
           line.substr(4).starts_with(id + ":");
  }
  if (line.starts_with("Thread ") && line.find('(') != std::string_view::npos) {
    return line.find("(LWP " + id + ")") != std::string_view::npos ||
           line.find("(process " + id + ")") != std::string_view::npos ||
           line.find("(process " + id + " ") != std::string_view::npos;
  }
  return std::nullopt;
}

}  // namespace

std::vector<StackFrame> parse_py_spy_main_thread(std::string_view dump, pid_t pid) {
  std::vector<StackFrame> first_thread;
  std::vector<StackFrame> main_thread;
  enum class Block { kNone, kFirst, kMain, kOther } block = Block::kNone;
  bool seen_thread = false;
  for (std::string_view line : split_lines(dump)) {
    if (line.starts_with("Thread ")) {
      const bool main = is_py_spy_main_header(line, pid);
      block = main ? Block::kMain : (seen_thread ? Block::kOther : Block::kFirst);
      seen_thread = true;
      continue;
    }
    if (!starts_with_space(line)) {
      if (!trim(line).empty())
        block = Block::kNone;  // error text or the next section: no frames there
      continue;
    }
    if (block == Block::kNone || block == Block::kOther)
      continue;
    if (auto frame = parse_py_spy_frame(line))
      (block == Block::kMain ? main_thread : first_thread).push_back(std::move(*frame));
  }
  return main_thread.empty() ? first_thread : main_thread;
}

std::vector<StackFrame> parse_native_main_thread(std::string_view dump, pid_t pid) {
  std::vector<StackFrame> unthreaded;  // frames before any thread header
  std::vector<StackFrame> first_thread;
  std::vector<StackFrame> main_thread;
  std::vector<StackFrame>* target = &unthreaded;
  bool seen_header = false;
  for (std::string_view line : split_lines(dump)) {
    if (const std::optional<bool> main = native_thread_header(line, pid)) {
      if (*main && main_thread.empty()) {
        target = &main_thread;
      } else {
        target = seen_header ? nullptr : &first_thread;
      }
      seen_header = true;
      continue;
    }
    if (target == nullptr)
      continue;
    if (std::optional<StackFrame> frame = parse_native_frame(line)) {
      target->push_back(std::move(*frame));
    } else if (starts_with_space(line) && !target->empty() &&
               target->back().location.find(':') == std::string::npos) {
      // eu-stack -s: the source line of the frame above, indented on its own line.
      const std::string_view source = trim(line);
      if (source.find(':') != std::string_view::npos)
        target->back().location = without_column(source);
    }
  }
  if (!main_thread.empty())
    return main_thread;
  return first_thread.empty() ? unthreaded : first_thread;
}

CapturedStacks parse_stack_file(std::string_view file_text, pid_t pid) {
  CapturedStacks stacks;
  const std::string python_header = std::string(kStackSectionMarker) + "python stacks:";
  const std::string native_header = std::string(kStackSectionMarker) + "native stacks:";
  enum class Section { kNone, kPython, kNative } section = Section::kNone;
  std::size_t section_start = 0;
  auto finish = [&](std::size_t end) {
    const std::string_view body = file_text.substr(section_start, end - section_start);
    if (section == Section::kPython && stacks.python.empty())
      stacks.python = parse_py_spy_main_thread(body, pid);
    if (section == Section::kNative && stacks.native.empty())
      stacks.native = parse_native_main_thread(body, pid);
  };
  common::Lines lines(file_text);
  while (const auto line = lines.next()) {
    if (line->starts_with(kStackSectionMarker)) {
      finish(lines.line_start());
      section = line->starts_with(python_header)   ? Section::kPython
                : line->starts_with(native_header) ? Section::kNative
                                                   : Section::kNone;
      section_start = lines.rest_start();
    }
  }
  finish(file_text.size());
  return stacks;
}

std::vector<StackFrame> summary_frames(const CapturedStacks& stacks, std::size_t max_frames) {
  std::vector<StackFrame> shown;
  bool has_python = false;
  for (const StackFrame& frame : stacks.python)
    has_python = has_python || frame.python;
  if (has_python) {
    if (!stacks.python.front().python && max_frames > 1)
      shown.push_back(stacks.python.front());  // where the thread waits (e.g. a C call)
    for (const StackFrame& frame : stacks.python) {
      if (shown.size() >= max_frames)
        break;
      if (frame.python)
        shown.push_back(frame);
    }
    return shown;
  }
  const std::vector<StackFrame>& native = stacks.native.empty() ? stacks.python : stacks.native;
  for (const StackFrame& frame : native) {
    if (shown.size() >= max_frames)
      break;
    if (frame.function != "??")
      shown.push_back(frame);
  }
  return shown;
}

}  // namespace ddprun::agent
