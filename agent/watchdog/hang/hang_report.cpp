#include "agent/watchdog/hang/hang_report.hpp"

#include <climits>
#include <cstdio>
#include <stdexcept>

#include "agent/workers/worker_exit.hpp"

namespace ddprun::agent {

namespace {

using nlohmann::json;

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

const char* cause_key(HangCause cause) {
  return cause == HangCause::kTimerExpired ? "timer_expired" : "no_heartbeat";
}

// ---- reading back -----------------------------------------------------------------------------

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("hang report: " + what);
}

const json& field(const json& object, const char* name) {
  if (!object.is_object() || !object.contains(name))
    bad(std::string("missing \"") + name + "\"");
  return object.at(name);
}

std::string text_field(const json& object, const char* name) {
  const json& value = field(object, name);
  if (!value.is_string() || value.get_ref<const std::string&>().size() > kMaxReportTextBytes)
    bad(std::string("\"") + name + "\" must be a string of at most " +
        std::to_string(kMaxReportTextBytes) + " bytes");
  return value.get<std::string>();
}

long long int_field(const json& object, const char* name, long long low, long long high) {
  const json& value = field(object, name);
  const bool beyond_int64 =
      value.is_number_unsigned() && value.get<unsigned long long>() > LLONG_MAX;
  if (!value.is_number_integer() || beyond_int64 || value.get<long long>() < low ||
      value.get<long long>() > high)
    bad(std::string("\"") + name + "\" must be an integer in [" + std::to_string(low) + ", " +
        std::to_string(high) + "]");
  return value.get<long long>();
}

std::chrono::milliseconds duration_field(const json& object, const char* name) {
  const json& value = field(object, name);
  // Up to ten years: beyond that a value is corrupt, and the conversion stays exact.
  constexpr double kMaxSeconds = 10.0 * 365 * 24 * 3600;
  if (!value.is_number() || !(value.get<double>() >= 0) || value.get<double>() > kMaxSeconds)
    bad(std::string("\"") + name + "\" must be a non-negative number of seconds");
  return std::chrono::milliseconds(static_cast<long long>(value.get<double>() * 1000.0 + 0.5));
}

// An array of at most max_entries; `entries` names them in the message ("frames").
const json& bounded_array_field(const json& object, const char* name, std::size_t max_entries,
                                const char* entries) {
  const json& value = field(object, name);
  if (!value.is_array() || value.size() > max_entries)
    bad(std::string("\"") + name + "\" must be an array of at most " + std::to_string(max_entries) +
        " " + entries);
  return value;
}

}  // namespace

std::string frame_text(const StackFrame& frame) {
  return frame.location.empty() ? frame.function : frame.function + " (" + frame.location + ")";
}

std::string frames_text(const std::vector<StackFrame>& frames) {
  std::string text;
  for (std::size_t i = 0; i < frames.size(); ++i)
    text += (i == 0 ? "" : " < ") + frame_text(frames[i]);
  return text;
}

std::string rank_title(const WatchedWorker& worker) {
  return "rank " + std::to_string(worker.global_rank) + " (local_rank " +
         std::to_string(worker.local_rank) + ", pid " + std::to_string(worker.pid) + ")";
}

HungRank hung_rank_from_timer(const TimerExpiry& expiry) {
  HungRank rank;
  rank.worker = expiry.worker;
  rank.cause = HangCause::kTimerExpired;
  rank.scope_id = expiry.scope_id;
  rank.signal = expiry.signal;
  return rank;
}

HungRank hung_rank_from_silence(const HungWorker& hung, std::chrono::milliseconds timeout) {
  HungRank rank;
  rank.worker = hung.worker;
  rank.cause = HangCause::kNoHeartbeat;
  rank.silent_for = hung.silent_for;
  rank.timeout = timeout;
  return rank;
}

void attach_stacks(HungRank& rank, const CapturedStacks& stacks, const std::string& stack_file) {
  rank.top_frames = summary_frames(stacks, kHangReportFrames);
  rank.stack_file = stack_file;
}

std::string describe_hang_cause(const HungRank& rank) {
  if (rank.cause == HangCause::kTimerExpired) {
    return "file-timer scope \"" + rank.scope_id + "\" expired (" +
           (rank.signal > 0 ? signal_name(rank.signal) : std::string("no signal requested")) + ")";
  }
  return "no heartbeat for " + seconds_text(rank.silent_for) + " s (--watchdog-timeout " +
         seconds_text(rank.timeout) + " s)";
}

std::string format_hung_rank_message(const HungRank& rank) {
  std::string text = "hung: " + describe_hang_cause(rank);
  if (rank.top_frames.empty()) {
    text += "\nstuck at: <no stack captured>";
  } else {
    for (std::size_t i = 0; i < rank.top_frames.size(); ++i)
      text += (i == 0 ? "\nstuck at: " : "\n          ") + frame_text(rank.top_frames[i]);
  }
  if (!rank.stack_file.empty())
    text += "\nstacks  : " + rank.stack_file;
  return text;
}

std::vector<std::string> format_hang_report_lines(const HangReport& report) {
  std::vector<std::string> lines;
  std::string ranks;
  for (const HungRank& rank : report.hung)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank.worker.global_rank);
  lines.push_back("Hang detected on " + report.host + ": rank" +
                  (report.hung.size() == 1 ? " " : "s ") + ranks);
  for (const HungRank& rank : report.hung) {
    lines.push_back("  " + rank_title(rank.worker) + ":");
    std::string message = format_hung_rank_message(rank);
    std::size_t start = 0;
    while (start <= message.size()) {
      std::size_t end = message.find('\n', start);
      if (end == std::string::npos)
        end = message.size();
      lines.push_back("    " + message.substr(start, end - start));
      start = end + 1;
    }
  }
  if (!report.stacks_dir.empty())
    lines.push_back("  stacks of every local rank: " + report.stacks_dir);
  return lines;
}

json hang_report_json(const HangReport& report) {
  json hung = json::array();
  for (const HungRank& rank : report.hung) {
    json entry = {{"rank", rank.worker.global_rank},
                  {"local_rank", rank.worker.local_rank},
                  {"pid", rank.worker.pid},
                  {"cause", cause_key(rank.cause)},
                  {"reason", describe_hang_cause(rank)},
                  {"stack_file", rank.stack_file}};
    if (rank.cause == HangCause::kTimerExpired) {
      entry["scope_id"] = rank.scope_id;
      entry["signal"] = rank.signal;
    } else {
      entry["silent_for_s"] = static_cast<double>(rank.silent_for.count()) / 1000.0;
      entry["timeout_s"] = static_cast<double>(rank.timeout.count()) / 1000.0;
    }
    json frames = json::array();
    for (const StackFrame& frame : rank.top_frames)
      frames.push_back(
          {{"function", frame.function}, {"location", frame.location}, {"python", frame.python}});
    entry["top_frames"] = std::move(frames);
    hung.push_back(std::move(entry));
  }
  return {{"host", report.host}, {"hung", std::move(hung)}, {"stacks_dir", report.stacks_dir}};
}

HangReport hang_report_from_json(const json& fields) {
  HangReport report;
  report.host = text_field(fields, "host");
  report.stacks_dir = text_field(fields, "stacks_dir");
  const json& hung = bounded_array_field(fields, "hung", kMaxHungRanksInReport, "entries");
  for (const json& entry : hung) {
    HungRank rank;
    rank.worker.global_rank = static_cast<int>(int_field(entry, "rank", 0, INT_MAX));
    rank.worker.local_rank = static_cast<int>(int_field(entry, "local_rank", 0, INT_MAX));
    rank.worker.pid = static_cast<pid_t>(int_field(entry, "pid", 0, INT_MAX));
    const std::string cause = text_field(entry, "cause");
    if (cause == cause_key(HangCause::kTimerExpired)) {
      rank.cause = HangCause::kTimerExpired;
      rank.scope_id = text_field(entry, "scope_id");
      rank.signal = static_cast<int>(int_field(entry, "signal", INT_MIN, kMaxSignalNumber));
    } else if (cause == cause_key(HangCause::kNoHeartbeat)) {
      rank.cause = HangCause::kNoHeartbeat;
      rank.silent_for = duration_field(entry, "silent_for_s");
      rank.timeout = duration_field(entry, "timeout_s");
    } else {
      bad("unknown cause \"" + cause.substr(0, 40) + "\"");
    }
    rank.stack_file = text_field(entry, "stack_file");
    const json& frames = bounded_array_field(entry, "top_frames", kHangReportFrames, "frames");
    for (const json& frame : frames) {
      const json& python = field(frame, "python");
      if (!python.is_boolean())
        bad("\"python\" must be true or false");
      StackFrame parsed{text_field(frame, "function"), text_field(frame, "location"),
                        python.get<bool>()};
      rank.top_frames.push_back(std::move(parsed));
    }
    report.hung.push_back(std::move(rank));
  }
  return report;
}

}  // namespace ddprun::agent
