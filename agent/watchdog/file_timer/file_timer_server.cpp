#include "agent/watchdog/file_timer/file_timer_server.hpp"

#include <utility>

#include "agent/watchdog/file_timer/file_timer_request.hpp"

namespace ddprun::agent {

namespace {

// Scope ids come from workers (up to 4 KiB, any bytes): shown shortened and printable.
std::string printable_scope(const std::string& scope_id) {
  constexpr std::size_t kMaxShownBytes = 80;
  std::string shown;
  for (char c : scope_id.substr(0, kMaxShownBytes))
    shown += (c >= 0x20 && c != 0x7f) ? c : '?';
  if (scope_id.size() > kMaxShownBytes)
    shown += "...";
  return "\"" + shown + "\"";
}

// What json.dumps() always writes first. A writer that died mid-line leaves its bytes in
// front of the next request (see FileTimerFifo); that request starts here.
constexpr std::string_view kRequestStart = "{\"version\"";

}  // namespace

FileTimerServer::FileTimerServer(std::string path) : fifo_(std::move(path)) {}

void FileTimerServer::watch(std::vector<WatchedWorker> workers) {
  table_.start_group(std::move(workers));
}

void FileTimerServer::forget_worker(pid_t pid) {
  table_.forget_worker(pid);
}

FileTimerServer::Events FileTimerServer::on_readable(double now_epoch_s) {
  Events events;
  for (const FileTimerFifo::Line& line : fifo_.read_lines()) {
    if (line.oversize) {
      note_malformed("a request longer than " + std::to_string(kFileTimerMaxLineBytes) + " bytes",
                     events);
    } else {
      handle_line(line.text, events);
    }
  }
  events.expired = table_.take_expired(now_epoch_s);
  return events;
}

FileTimerServer::Events FileTimerServer::on_deadline(double now_epoch_s) {
  Events events;
  events.expired = table_.take_expired(now_epoch_s);
  return events;
}

void FileTimerServer::handle_line(const std::string& line, Events& events) {
  FileTimerParseResult parsed = parse_file_timer_request(line);
  if (parsed.ok()) {
    handle_request(*parsed.request, events);
    return;
  }
  note_malformed(parsed.rejection, events);
  const std::size_t resume = line.rfind(kRequestStart);
  if (resume != std::string::npos && resume > 0) {
    FileTimerParseResult tail = parse_file_timer_request(std::string_view(line).substr(resume));
    if (tail.ok())
      handle_request(*tail.request, events);
  }
}

void FileTimerServer::handle_request(const FileTimerRequest& request, Events& events) {
  ++counters_.requests;
  switch (table_.apply(request)) {
    case TimerTable::Outcome::kNotAWorker:
      ++counters_.not_a_worker;
      if (!std::exchange(warned_not_a_worker_, true)) {
        events.warnings.push_back(
            "file timer: ignoring a request from pid " + std::to_string(request.pid) + " (scope " +
            printable_scope(request.scope_id) +
            "), which is not a worker of this group; further ones are ignored silently");
      }
      break;
    case TimerTable::Outcome::kTooManyTimers:
      ++counters_.over_timer_cap;
      if (!std::exchange(warned_over_cap_, true)) {
        events.warnings.push_back("file timer: pid " + std::to_string(request.pid) + " holds " +
                                  std::to_string(kMaxTimersPerWorker) +
                                  " timers; ignoring new scopes such as " +
                                  printable_scope(request.scope_id));
      }
      break;
    case TimerTable::Outcome::kAcquired:
    case TimerTable::Outcome::kReleased:
    case TimerTable::Outcome::kReleaseUnknown:
      break;
  }
}

void FileTimerServer::note_malformed(const std::string& reason, Events& events) {
  ++counters_.malformed;
  if (!std::exchange(warned_malformed_, true)) {
    events.warnings.push_back("file timer: ignoring a malformed request on " + fifo_.path() + ": " +
                              reason +
                              "; further malformed requests in this worker group are ignored "
                              "silently");
  }
}

}  // namespace ddprun::agent
