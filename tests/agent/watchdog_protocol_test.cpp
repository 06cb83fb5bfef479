// torchrun's file-timer protocol without I/O: the request parser (lines as PyTorch 2.13's
// FileTimerRequest.to_json() writes them, compact JSON, every malformed form, oversize), the
// timer table with the time as a value, and the environment contract.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "agent/watchdog/file_timer/file_timer_request.hpp"
#include "agent/watchdog/file_timer/file_timer_setup.hpp"
#include "agent/watchdog/file_timer/timer_table.hpp"

using namespace ddprun::agent;

namespace {

// Verbatim output of FileTimerRequest(...).to_json() in PyTorch 2.13.
const std::string kPythonAcquire =
    R"({"version": 1, "pid": 4242, "scope_id": "/home/ada/train.py#17", "expiration_time": 1767225600.123456, "signal": 9})";
const std::string kPythonRelease =
    R"({"version": 1, "pid": 4242, "scope_id": "/home/ada/train.py#17", "expiration_time": -1, "signal": 0})";
const std::string kPythonEscapedScope =
    R"({"version": 1, "pid": 4242, "scope_id": "sc\u00e9ne \"q\" \\ \n", "expiration_time": 1767225600, "signal": 15})";

FileTimerRequest acquire(pid_t pid, const std::string& scope, double expiration, int signal = 9) {
  return FileTimerRequest{pid, scope, expiration, signal};
}

FileTimerRequest release(pid_t pid, const std::string& scope) {
  return FileTimerRequest{pid, scope, -1, 0};
}

std::vector<WatchedWorker> two_workers() {
  return {WatchedWorker{0, 4, 100}, WatchedWorker{1, 5, 101}};
}

// A table watching two_workers() with `timers` acquired, in this order.
TimerTable two_workers_holding(std::initializer_list<FileTimerRequest> timers) {
  TimerTable table;
  table.start_group(two_workers());
  for (const FileTimerRequest& timer : timers)
    REQUIRE(table.apply(timer) == TimerTable::Outcome::kAcquired);
  return table;
}

}  // namespace

TEST_CASE("file-timer parser reads what PyTorch's FileTimerClient writes") {
  FileTimerParseResult acquired = parse_file_timer_request(kPythonAcquire);
  REQUIRE(acquired.ok());
  CHECK(acquired.request->pid == 4242);
  CHECK(acquired.request->scope_id == "/home/ada/train.py#17");
  CHECK(acquired.request->expiration_epoch_s == Approx(1767225600.123456).epsilon(1e-15));
  CHECK(acquired.request->signal == 9);
  CHECK_FALSE(acquired.request->is_release());

  FileTimerParseResult released = parse_file_timer_request(kPythonRelease);
  REQUIRE(released.ok());
  CHECK(released.request->is_release());
  CHECK(released.request->signal == 0);

  FileTimerParseResult escaped = parse_file_timer_request(kPythonEscapedScope);
  REQUIRE(escaped.ok());
  CHECK(escaped.request->scope_id == "sc\xc3\xa9ne \"q\" \\ \n");
  CHECK(escaped.request->expiration_epoch_s == 1767225600.0);  // an integer is a time too
  CHECK(escaped.request->signal == 15);
}

TEST_CASE("file-timer parser accepts compact JSON, any field order, extra fields, no version") {
  for (const std::string line : {
           R"({"version":1,"pid":7,"scope_id":"s","expiration_time":5.5,"signal":9})",
           R"({"signal":9,"expiration_time":5.5,"scope_id":"s","pid":7,"version":1})",
           R"(  {"pid":7,"scope_id":"s","expiration_time":5.5,"signal":9,"extra":[1,{"a":2}]} )",
           "{\"pid\":7,\"scope_id\":\"s\",\"expiration_time\":5.5,\"signal\":9}\r",
       }) {
    INFO(line);
    FileTimerParseResult parsed = parse_file_timer_request(line);
    REQUIRE(parsed.ok());
    CHECK(parsed.request->pid == 7);
    CHECK(parsed.request->scope_id == "s");
    CHECK(parsed.request->expiration_epoch_s == 5.5);
    CHECK(parsed.request->signal == 9);
  }
  // What json.dumps writes for expires(after=math.inf): a timer that never fires. The word
  // inside a string is left alone.
  FileTimerParseResult forever = parse_file_timer_request(
      R"({"version": 1, "pid": 7, "scope_id": "Infinity \" Infinity", "expiration_time": Infinity, "signal": 9})");
  REQUIRE(forever.ok());
  CHECK(forever.request->scope_id == "Infinity \" Infinity");
  CHECK(forever.request->expiration_epoch_s > 1e300);
  CHECK(
      parse_file_timer_request(R"({"pid":7,"scope_id":"s","expiration_time":-Infinity,"signal":0})")
          .request->is_release());
  // Any negative expiration is a release; signal <= 0 is "do not kill", not an error.
  CHECK(parse_file_timer_request(R"({"pid":7,"scope_id":"s","expiration_time":-0.5,"signal":-3})")
            .request->is_release());
}

TEST_CASE("file-timer parser refuses every malformed form with a reason") {
  struct Case {
    std::string line;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"not json", "not valid JSON"},
      {R"({"pid": 7, "scope_id": "s")", "not valid JSON"},
      {R"({"pid":7,"scope_id":"s","expiration_time":1e999,"signal":9})", "number overflow"},
      {R"({"pid":7,"scope_id":"s","expiration_time":Infinityx,"signal":9})", "not valid JSON"},
      {R"({"pid":7,"scope_id":"s","expiration_time":NaN,"signal":9})", "not valid JSON"},
      {"[1, 2, 3]", "not a JSON object"},
      {"42", "not a JSON object"},
      {R"("a string")", "not a JSON object"},
      {"null", "not a JSON object"},
      {R"({"scope_id":"s","expiration_time":1,"signal":9})", "missing field \"pid\""},
      {R"({"pid":7,"expiration_time":1,"signal":9})", "missing field \"scope_id\""},
      {R"({"pid":7,"scope_id":"s","signal":9})", "missing field \"expiration_time\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":1})", "missing field \"signal\""},
      {R"({"version":2,"pid":7,"scope_id":"s","expiration_time":1,"signal":9})", "version"},
      {R"({"version":"1","pid":7,"scope_id":"s","expiration_time":1,"signal":9})", "version"},
      {R"({"pid":0,"scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":-5,"scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":7.5,"scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":"7","scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":true,"scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":4294967296,"scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":18446744073709551615,"scope_id":"s","expiration_time":1,"signal":9})", "\"pid\""},
      {R"({"pid":7,"scope_id":5,"expiration_time":1,"signal":9})", "\"scope_id\""},
      {R"({"pid":7,"scope_id":null,"expiration_time":1,"signal":9})", "\"scope_id\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":"1","signal":9})", "expiration_time"},
      {R"({"pid":7,"scope_id":"s","expiration_time":false,"signal":9})", "expiration_time"},
      {R"({"pid":7,"scope_id":"s","expiration_time":1,"signal":65})", "\"signal\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":1,"signal":9.0})", "\"signal\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":1,"signal":"SIGKILL"})", "\"signal\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":1,"signal":18446744073709551615})",
       "\"signal\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":1,"signal":-9999999999})", "\"signal\""},
      {R"({"pid":7,"scope_id":"s","expiration_time":1,"signal":9} trailing)", "not valid JSON"},
      {std::string("{\"pid\":7,\"scope_id\":\"\xff\",\"expiration_time\":1,\"signal\":9}"),
       "not valid JSON"},
      {std::string(2000, '[') + std::string(2000, ']'), "not a JSON object"},
  };
  for (const Case& c : cases) {
    INFO(c.line.substr(0, 120));
    FileTimerParseResult parsed = parse_file_timer_request(c.line);
    CHECK_FALSE(parsed.ok());
    CHECK_THAT(parsed.rejection, Catch::Contains(c.reason));
  }
}

TEST_CASE("file-timer parser bounds a request at PIPE_BUF") {
  const std::string prefix = R"({"pid":7,"scope_id":")";
  const std::string suffix = R"(","expiration_time":1,"signal":9})";
  const std::size_t fill = kFileTimerMaxLineBytes - prefix.size() - suffix.size();
  const std::string longest = prefix + std::string(fill, 'x') + suffix;
  REQUIRE(longest.size() == kFileTimerMaxLineBytes);
  CHECK(parse_file_timer_request(longest).ok());
  const std::string too_long = prefix + std::string(fill + 1, 'x') + suffix;
  FileTimerParseResult parsed = parse_file_timer_request(too_long);
  CHECK_FALSE(parsed.ok());
  CHECK_THAT(parsed.rejection, Catch::Contains("4097 bytes exceeds PIPE_BUF (4096 bytes)"));
  // Far over the bound: refused on length alone.
  CHECK_FALSE(parse_file_timer_request(std::string(1 << 20, ' ')).ok());
}

TEST_CASE("timer table: acquire, replace, release by (pid, scope)") {
  TimerTable table;
  table.start_group(two_workers());
  CHECK(table.next_deadline_epoch_s() == std::nullopt);
  CHECK(table.apply(acquire(100, "a", 50)) == TimerTable::Outcome::kAcquired);
  CHECK(table.apply(acquire(100, "b", 40)) == TimerTable::Outcome::kAcquired);
  CHECK(table.apply(acquire(101, "a", 60)) == TimerTable::Outcome::kAcquired);
  CHECK(table.timer_count() == 3);
  CHECK(table.next_deadline_epoch_s() == 40);
  // Same key: replaced, not added.
  CHECK(table.apply(acquire(100, "b", 70)) == TimerTable::Outcome::kAcquired);
  CHECK(table.timer_count() == 3);
  CHECK(table.next_deadline_epoch_s() == 50);
  CHECK(table.apply(release(100, "a")) == TimerTable::Outcome::kReleased);
  CHECK(table.apply(release(100, "a")) == TimerTable::Outcome::kReleaseUnknown);
  CHECK(table.next_deadline_epoch_s() == 60);
  CHECK(table.timer_count() == 2);
  // Nothing is due before the earliest deadline.
  CHECK(table.take_expired(59.999).empty());
  CHECK(table.timer_count() == 2);
}

TEST_CASE("timer table ignores pids that are not current workers") {
  TimerTable table;
  table.start_group(two_workers());
  CHECK(table.apply(acquire(999, "a", 1)) == TimerTable::Outcome::kNotAWorker);
  CHECK(table.apply(release(999, "a")) == TimerTable::Outcome::kNotAWorker);
  CHECK(table.timer_count() == 0);
  CHECK(table.take_expired(1e12).empty());
  // An exited worker's pid stops being trusted, and its timers go with it.
  REQUIRE(table.apply(acquire(101, "a", 10)) == TimerTable::Outcome::kAcquired);
  table.forget_worker(101);
  CHECK(table.timer_count() == 0);
  CHECK(table.apply(acquire(101, "a", 10)) == TimerTable::Outcome::kNotAWorker);
  CHECK(table.take_expired(1e12).empty());
}

TEST_CASE("timer table expiry: torchrun's choice of signal, then every timer of the pid cleared") {
  TimerTable table =
      two_workers_holding({acquire(100, "no-kill-early", 10, 0), acquire(100, "term", 20, 15),
                           acquire(100, "kill-later", 30, 9), acquire(100, "not-yet", 100, 9),
                           acquire(101, "other", 25, 9)});

  SECTION("expiration_time <= now is expired: the boundary counts") {
    std::vector<TimerExpiry> expired = table.take_expired(10);
    REQUIRE(expired.size() == 1);
    CHECK(expired[0].signal == 0);  // only a signal-0 timer expired: report, do not kill
    CHECK(expired[0].scope_id == "no-kill-early");
    CHECK(expired[0].expired_timers == 1);
    // torchrun clears every timer of a reaped pid, expired or not.
    CHECK(table.timer_count() == 1);
    CHECK(table.next_deadline_epoch_s() == 25);
  }
  SECTION("the first expired timer with a signal > 0, in expiration order, decides") {
    std::vector<TimerExpiry> expired = table.take_expired(35);
    REQUIRE(expired.size() == 2);
    CHECK(expired[0].worker.pid == 100);
    CHECK(expired[0].worker.global_rank == 4);
    CHECK(expired[0].worker.local_rank == 0);
    CHECK(expired[0].scope_id == "term");
    CHECK(expired[0].signal == 15);
    CHECK(expired[0].expiration_epoch_s == 20);
    CHECK(expired[0].expired_timers == 3);
    CHECK(expired[1].worker.pid == 101);
    CHECK(expired[1].signal == 9);
    CHECK(expired[1].scope_id == "other");
    // Reported once.
    CHECK(table.timer_count() == 0);
    CHECK(table.take_expired(1e12).empty());
    CHECK(table.next_deadline_epoch_s() == std::nullopt);
  }
  SECTION("equal expiration times: the scope breaks the tie, whatever the arrival order") {
    TimerTable other = two_workers_holding(
        {acquire(100, "z", 5, 0), acquire(100, "b", 5, 6), acquire(100, "a", 5, 0)});
    std::vector<TimerExpiry> expired = other.take_expired(5);
    REQUIRE(expired.size() == 1);
    CHECK(expired[0].scope_id == "b");
    CHECK(expired[0].signal == 6);
  }
}

TEST_CASE("timer table: a request that arrives already expired fires at once") {
  TimerTable table = two_workers_holding({acquire(101, "late", 5)});
  std::vector<TimerExpiry> expired = table.take_expired(1000);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].worker.pid == 101);
}

TEST_CASE("timer table starts empty per worker group") {
  TimerTable table = two_workers_holding({acquire(100, "a", 5)});
  table.start_group({WatchedWorker{0, 0, 200}});
  CHECK(table.timer_count() == 0);
  CHECK(table.take_expired(1e12).empty());
  CHECK(table.apply(acquire(100, "a", 5)) == TimerTable::Outcome::kNotAWorker);
  CHECK(table.apply(acquire(200, "a", 5)) == TimerTable::Outcome::kAcquired);
}

TEST_CASE("timer table caps the timers of one worker") {
  TimerTable table;
  table.start_group(two_workers());
  for (std::size_t i = 0; i < kMaxTimersPerWorker; ++i) {
    std::string scope = std::to_string(i);
    scope.insert(0, 1, 's');  // not "s" + ...: GCC 12 warns falsely (-Wrestrict) at -O3
    REQUIRE(table.apply(acquire(100, scope, 5)) == TimerTable::Outcome::kAcquired);
  }
  CHECK(table.apply(acquire(100, "one-more", 5)) == TimerTable::Outcome::kTooManyTimers);
  // Replacing an existing scope and other workers' timers still work.
  CHECK(table.apply(acquire(100, "s0", 6)) == TimerTable::Outcome::kAcquired);
  CHECK(table.apply(acquire(101, "x", 5)) == TimerTable::Outcome::kAcquired);
  CHECK(table.apply(release(100, "s1")) == TimerTable::Outcome::kReleased);
  CHECK(table.apply(acquire(100, "one-more", 5)) == TimerTable::Outcome::kAcquired);
}

TEST_CASE("file-timer env contract follows torchrun 2.13's _setup_local_watchdog") {
  const std::string fallback = "/tmp/watchdog_timer_fresh";
  SECTION("off and no path: nothing") {
    FileTimerSetup setup = decide_file_timer_setup({{"PATH", "/bin"}}, fallback);
    CHECK_FALSE(setup.serve);
    CHECK_FALSE(setup.path);
    EnvMap worker{{"RANK", "0"}};
    add_file_timer_env(worker, setup);
    CHECK_FALSE(worker.contains(kTimerFileEnv));
  }
  SECTION("exactly \"1\" enables it, on the default path when none is named") {
    FileTimerSetup setup = decide_file_timer_setup({{kEnableFileTimerEnv, "1"}}, fallback);
    CHECK(setup.serve);
    CHECK(setup.path == fallback);
    EnvMap worker;
    add_file_timer_env(worker, setup);
    CHECK(worker.at(kTimerFileEnv) == fallback);
  }
  SECTION("anything but \"1\" leaves it off") {
    for (const char* value : {"true", "True", "yes", "01", " 1", "", "0"}) {
      INFO(value);
      CHECK_FALSE(decide_file_timer_setup({{kEnableFileTimerEnv, value}}, fallback).serve);
    }
  }
  SECTION("enabled with a named path serves that path") {
    FileTimerSetup setup =
        decide_file_timer_setup({{kEnableFileTimerEnv, "1"}, {kTimerFileEnv, "/x/fifo"}}, fallback);
    CHECK(setup.serve);
    CHECK(setup.path == "/x/fifo");
  }
  SECTION("off with a named path: workers still get the path, nobody serves it") {
    FileTimerSetup setup = decide_file_timer_setup({{kTimerFileEnv, "/x/fifo"}}, fallback);
    CHECK_FALSE(setup.serve);
    CHECK(setup.path == "/x/fifo");
    EnvMap worker{{kTimerFileEnv, "stale"}};
    add_file_timer_env(worker, setup);
    CHECK(worker.at(kTimerFileEnv) == "/x/fifo");
  }
}

TEST_CASE(
    "default file-timer path: tempfile.gettempdir()/watchdog_timer_<uuid4>, fresh each time") {
  const std::string first = default_file_timer_path({{"TMPDIR", "/nonexistent-dir"}});
  const std::string second = default_file_timer_path({});
  CHECK_THAT(first, Catch::StartsWith("/tmp/watchdog_timer_"));  // unusable TMPDIR skipped
  CHECK(first != second);
  const std::string uuid = first.substr(std::string("/tmp/watchdog_timer_").size());
  REQUIRE(uuid.size() == 36);
  CHECK(uuid[8] == '-');
  CHECK(uuid[13] == '-');
  CHECK(uuid[14] == '4');                                          // version 4
  CHECK(std::string("89ab").find(uuid[19]) != std::string::npos);  // RFC 4122 variant
  CHECK_THAT(default_file_timer_path({{"TMPDIR", "/var/tmp/"}}),
             Catch::StartsWith("/var/tmp/watchdog_timer_"));
}

TEST_CASE("file-timer parser survives mutated requests (deterministic fuzz)") {
  std::mt19937 random(20260515);
  std::size_t accepted = 0;
  for (int round = 0; round < 5000; ++round) {
    std::string line = kPythonAcquire;
    const int edits = 1 + static_cast<int>(random() % 6);
    for (int e = 0; e < edits && !line.empty(); ++e) {
      const std::size_t at = random() % line.size();
      switch (random() % 4) {
        case 0:
          line[at] = static_cast<char>(random() % 256);
          break;
        case 1:
          line.erase(at, 1 + random() % 8);
          break;
        case 2:
          line.insert(at, 1, "{}[]\",:0-9eE.\\ "[random() % 16]);
          break;
        default:
          line.resize(at);
          break;
      }
    }
    const FileTimerParseResult parsed = parse_file_timer_request(line);
    if (parsed.ok()) {
      ++accepted;
      CHECK(parsed.request->pid > 0);
      CHECK(parsed.request->signal <= kMaxSignalNumber);
      CHECK(std::isfinite(parsed.request->expiration_epoch_s));
    } else {
      CHECK_FALSE(parsed.rejection.empty());
    }
  }
  CHECK(accepted > 0);  // some mutations (inside the scope string, digits) stay valid
}
