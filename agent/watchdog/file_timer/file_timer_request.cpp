#include "agent/watchdog/file_timer/file_timer_request.hpp"

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>

namespace ddprun::agent {

namespace {

using nlohmann::json;

FileTimerParseResult reject(std::string reason) {
  return FileTimerParseResult{std::nullopt, std::move(reason)};
}

// A short, printable rendering of a value for rejection messages (values come from workers).
std::string describe(const json& value) {
  constexpr std::size_t kMaxShown = 40;
  std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > kMaxShown)
    text = text.substr(0, kMaxShown) + "...";
  return text;
}

// JSON integers as a signed 64-bit value; nullopt for anything else (floats, booleans, strings,
// integers beyond int64).
std::optional<long long> as_integer(const json& value) {
  if (value.is_number_unsigned()) {
    const auto unsigned_value = value.get<unsigned long long>();
    if (unsigned_value > static_cast<unsigned long long>(LLONG_MAX))
      return std::nullopt;
    return static_cast<long long>(unsigned_value);
  }
  if (value.is_number_integer())
    return value.get<long long>();
  return std::nullopt;
}

// Python's json.dumps writes infinite floats as bare Infinity / -Infinity, which JSON lacks and
// torchrun's json.loads accepts (expires(after=math.inf): a timer that never fires). Outside
// strings they become the largest finite double, which no clock reaches. NaN stays invalid.
std::string replace_python_infinity(std::string_view line) {
  constexpr std::string_view kInfinity = "Infinity";
  std::string out;
  out.reserve(line.size());
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\' && i + 1 < line.size()) {
        out += c;
        out += line[++i];
        continue;
      }
      if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (line.substr(i).starts_with(kInfinity)) {
      out += "1.7976931348623157e308";
      i += kInfinity.size() - 1;
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

FileTimerParseResult parse_file_timer_request(std::string_view line) {
  if (line.size() > kFileTimerMaxLineBytes) {
    return reject("request of " + std::to_string(line.size()) + " bytes exceeds PIPE_BUF (" +
                  std::to_string(kFileTimerMaxLineBytes) + " bytes)");
  }
  json document;
  try {
    document = json::parse(replace_python_infinity(line));
  } catch (const json::exception& error) {
    return reject(std::string("not valid JSON: ") + error.what());
  }
  if (!document.is_object())
    return reject("not a JSON object: " + describe(document));

  for (const char* field : {"pid", "scope_id", "expiration_time", "signal"}) {
    if (!document.contains(field))
      return reject(std::string("missing field \"") + field + "\"");
  }
  if (auto version = document.find("version"); version != document.end()) {
    if (as_integer(*version) != kFileTimerProtocolVersion) {
      return reject("unsupported version " + describe(*version) + " (expected " +
                    std::to_string(kFileTimerProtocolVersion) + ")");
    }
  }

  const json& pid = document["pid"];
  const std::optional<long long> pid_value = as_integer(pid);
  if (!pid_value || *pid_value <= 0 || *pid_value > INT_MAX)
    return reject("\"pid\" must be a positive process id, got " + describe(pid));

  const json& scope_id = document["scope_id"];
  if (!scope_id.is_string())
    return reject("\"scope_id\" must be a string, got " + describe(scope_id));

  const json& expiration = document["expiration_time"];
  if (!expiration.is_number() || !std::isfinite(expiration.get<double>())) {
    return reject("\"expiration_time\" must be a finite number of epoch seconds, got " +
                  describe(expiration));
  }

  const json& signal = document["signal"];
  const std::optional<long long> signal_value = as_integer(signal);
  if (!signal_value || *signal_value > kMaxSignalNumber || *signal_value < INT_MIN) {
    return reject("\"signal\" must be an integer signal number (<= 0: do not kill), got " +
                  describe(signal));
  }

  FileTimerRequest request;
  request.pid = static_cast<pid_t>(*pid_value);
  request.scope_id = scope_id.get<std::string>();
  request.expiration_epoch_s = expiration.get<double>();
  request.signal = static_cast<int>(*signal_value);
  return FileTimerParseResult{std::move(request), {}};
}

}  // namespace ddprun::agent
