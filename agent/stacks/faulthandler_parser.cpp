#include "agent/stacks/faulthandler_parser.hpp"

#include <optional>
#include <string>

#include "common/text.hpp"

namespace ddprun::agent {

namespace {

using common::trim;

constexpr std::string_view kFatalLine = "Fatal Python error: ";

struct ThreadBlock {
  bool current = false;
  std::vector<StackFrame> frames;
};

// `File "/job/train.py", line 4 in wait_forever`; nullopt for anything else.
std::optional<StackFrame> parse_frame_line(std::string_view line) {
  line = trim(line);
  constexpr std::string_view kFile = "File \"";
  constexpr std::string_view kLine = "\", line ";
  if (!line.starts_with(kFile))
    return std::nullopt;
  const std::size_t file_end = line.find(kLine, kFile.size());
  if (file_end == std::string_view::npos)
    return std::nullopt;
  const std::string_view file = line.substr(kFile.size(), file_end - kFile.size());
  const std::string_view rest = line.substr(file_end + kLine.size());
  const std::size_t in = rest.find(" in ");
  if (in == std::string_view::npos)
    return std::nullopt;
  StackFrame frame;
  frame.function = std::string(trim(rest.substr(in + 4)));
  frame.location = std::string(file) + ":" + std::string(trim(rest.substr(0, in)));
  frame.python = true;
  return frame;
}

}  // namespace

std::string_view last_faulthandler_dump(std::string_view stderr_text, std::size_t max_bytes) {
  std::size_t at = stderr_text.rfind(kFatalLine);
  // Only at a line's start: the words inside a log line are no dump.
  while (at != std::string_view::npos && at > 0 && stderr_text[at - 1] != '\n')
    at = stderr_text.rfind(kFatalLine, at - 1);
  if (at == std::string_view::npos)
    return {};
  return stderr_text.substr(at, max_bytes);
}

std::vector<StackFrame> parse_faulthandler_main_thread(std::string_view dump) {
  std::vector<ThreadBlock> threads;
  common::Lines lines(dump);
  while (const auto line = lines.next()) {
    if (line->starts_with("Thread 0x") || line->starts_with("Current thread 0x")) {
      threads.push_back(ThreadBlock{line->starts_with("Current"), {}});
      continue;
    }
    if (threads.empty())
      continue;
    if (auto frame = parse_frame_line(*line))
      threads.back().frames.push_back(std::move(*frame));
  }
  const ThreadBlock* chosen = nullptr;
  for (const ThreadBlock& thread : threads) {
    if (!thread.frames.empty() && thread.frames.back().function == "<module>")
      chosen = &thread;
  }
  for (const ThreadBlock& thread : threads) {
    if (chosen == nullptr && thread.current)
      chosen = &thread;
  }
  if (chosen == nullptr && !threads.empty())
    chosen = &threads.front();
  return chosen == nullptr ? std::vector<StackFrame>{} : chosen->frames;
}

}  // namespace ddprun::agent
