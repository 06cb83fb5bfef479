#pragma once
// What ddprun tells people about a hang: which ranks hung, why (a file-timer scope expired, or
// no heartbeat for N s), where they were (top frames) and where the full stacks are. Lines for
// the failure table, a JSON object for the events file and for other nodes (so every node can
// print the same root cause), and back from JSON. Pure.

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/base/watched_worker.hpp"
#include "agent/stacks/stack_trace_parser.hpp"
#include "agent/watchdog/file_timer/timer_table.hpp"
#include "agent/watchdog/progress/progress_watch.hpp"

namespace ddprun::agent {

// Frames shown per hung rank; the stack file has all of them.
inline constexpr std::size_t kHangReportFrames = 5;
// Bounds on a report read back from JSON (it may come from another node through the store).
inline constexpr std::size_t kMaxHungRanksInReport = 4096;
inline constexpr std::size_t kMaxReportTextBytes = 4096;

enum class HangCause {
  kTimerExpired,  // a torchrun file-timer scope expired
  kNoHeartbeat,   // --watchdog-timeout: no heartbeat for the whole timeout
};

struct HungRank {
  WatchedWorker worker;
  HangCause cause = HangCause::kNoHeartbeat;
  std::string scope_id;                     // kTimerExpired: the scope that expired
  int signal = 0;                           // kTimerExpired: the signal it asked for (<= 0: none)
  std::chrono::milliseconds silent_for{0};  // kNoHeartbeat: since the last heartbeat
  std::chrono::milliseconds timeout{0};     // kNoHeartbeat: --watchdog-timeout
  std::vector<StackFrame> top_frames;       // innermost first; empty when not captured
  std::string stack_file;                   // empty when not captured
};

struct HangReport {
  std::string host;
  std::vector<HungRank> hung;
  std::string stacks_dir;  // where every local rank's stacks are; empty when none was captured
};

HungRank hung_rank_from_timer(const TimerExpiry& expiry);
HungRank hung_rank_from_silence(const HungWorker& hung, std::chrono::milliseconds timeout);
// Fills top_frames (summary_frames, kHangReportFrames) and stack_file from a captured stack.
void attach_stacks(HungRank& rank, const CapturedStacks& stacks, const std::string& stack_file);

// "wait_forever (/job/train.py:4)"; frames_text joins them innermost first with " < ".
std::string frame_text(const StackFrame& frame);
std::string frames_text(const std::vector<StackFrame>& frames);
// "rank 1 (local_rank 0, pid 4242)"
std::string rank_title(const WatchedWorker& worker);

// "file-timer scope \"train.py#12\" expired (SIGKILL)" / "no heartbeat for 12.3 s (timeout 10 s)"
std::string describe_hang_cause(const HungRank& rank);

// The block for the failure table, one string per line, no newlines.
std::vector<std::string> format_hang_report_lines(const HangReport& report);
// One rank's part, for a WorkerFailure message (torchrun's "traceback" field), '\n'-separated.
std::string format_hung_rank_message(const HungRank& rank);

// The fields of a "hang" event (EventLog::record adds time, event and node).
nlohmann::json hang_report_json(const HangReport& report);
// The inverse, validated and bounded; throws std::invalid_argument naming the bad field.
HangReport hang_report_from_json(const nlohmann::json& fields);

}  // namespace ddprun::agent
