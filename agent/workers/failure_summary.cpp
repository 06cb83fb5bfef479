#include "agent/workers/failure_summary.hpp"

#include <algorithm>
#include <ctime>
#include <sstream>

#include "agent/workers/worker_exit.hpp"

namespace ddprun::agent {

namespace {

constexpr std::size_t kMaxWidth = 60;  // torchrun caps the border width at 60

std::string indent_continuation_lines(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n')
      out += "  ";
  }
  return out;
}

std::string format_one(std::size_t index, const WorkerFailure& failure) {
  // torchrun 2.13's line is "exitcode  : ${exitcode} (pid: ${pid}) ${signal_name}", where the
  // signal part is " (SIGKILL)" or empty: the trailing blank is torchrun's, kept for parsers.
  const std::string signal_part =
      failure.exit_code < 0 ? " (" + signal_name(-failure.exit_code) + ")" : "";
  std::ostringstream out;
  out << '[' << index << "]:\n"
      << "  time      : " << format_failure_time(failure.timestamp) << '\n'
      << "  host      : " << failure.host << '\n'
      << "  rank      : " << failure.global_rank << " (local_rank: " << failure.local_rank << ")\n"
      << "  exitcode  : " << failure.exit_code << " (pid: " << failure.pid << ") " << signal_part
      << '\n'
      << "  error_file: " << (failure.error_file.empty() ? "<N/A>" : failure.error_file) << '\n'
      << "  traceback : " << indent_continuation_lines(failure.message);
  return out.str();
}

std::size_t longest_line(const std::string& text) {
  std::size_t longest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    longest = std::max(longest, line.size());
  return longest;
}

}  // namespace

std::string format_failure_time(UnixTime time) {
  std::time_t seconds = static_cast<std::time_t>(time.time_since_epoch().count());
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d_%H:%M:%S", &local);
  return text;
}

std::string failure_title_name(const WorkerSpec& workers) {
  if (!workers.entry_point.empty())
    return workers.entry_point;
  return workers.argv.empty() ? std::string() : workers.argv.front();
}

std::string format_failure_summary(const std::string& title_name,
                                   const std::vector<WorkerFailure>& failures) {
  const std::string title = title_name + " FAILED";
  // torchrun numbers the failures in the order of its rank-keyed map and picks the root cause
  // by time; the caller passes the root cause first.
  std::vector<std::size_t> by_rank(failures.size());
  for (std::size_t i = 0; i < by_rank.size(); ++i)
    by_rank[i] = i;
  std::stable_sort(by_rank.begin(), by_rank.end(), [&](std::size_t a, std::size_t b) {
    return failures[a].global_rank < failures[b].global_rank;
  });
  std::size_t width = title.size();
  std::string root = "<N/A>";
  std::vector<std::string> others;
  for (std::size_t index = 0; index < by_rank.size(); ++index) {
    std::string entry = format_one(index, failures[by_rank[index]]);
    width = std::max(width, longest_line(entry));
    if (by_rank[index] == 0) {
      root = std::move(entry);
    } else {
      others.push_back(std::move(entry));
    }
  }
  width = std::min(width, kMaxWidth);
  const std::string border(width, '=');
  const std::string section(width, '-');
  std::ostringstream out;
  out << '\n' << border << '\n' << title << '\n' << section << "\nFailures:\n";
  if (others.empty()) {
    out << "  <NO_OTHER_FAILURES>\n";
  } else {
    for (const auto& entry : others)
      out << entry << '\n';
  }
  out << section << "\nRoot Cause (first observed failure):\n" << root << '\n' << border << '\n';
  return out.str();
}

}  // namespace ddprun::agent
