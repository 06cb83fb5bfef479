#include "agent/workers/error_file.hpp"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ddprun::agent {

namespace {

constexpr std::size_t kMaxErrorFileBytes = 1 << 20;

std::optional<double> number_or_numeric_string(const nlohmann::json& value) {
  if (value.is_number())
    return value.get<double>();
  if (value.is_string()) {
    try {
      return std::stod(value.get<std::string>());
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ErrorFileContent> parse_error_file(const std::string& json_text) {
  auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message"))
    return std::nullopt;
  const auto& message = doc["message"];
  ErrorFileContent content;
  if (message.is_string()) {
    content.message = message.get<std::string>();
    return content;
  }
  if (!message.is_object())
    return std::nullopt;
  if (message.contains("message") && message["message"].is_string()) {
    content.message = message["message"].get<std::string>();
  }
  if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
    const auto& extra = message["extraInfo"];
    if (extra.contains("py_callstack") && extra["py_callstack"].is_string()) {
      content.message = extra["py_callstack"].get<std::string>();
    }
    if (extra.contains("timestamp")) {
      if (const auto seconds = number_or_numeric_string(extra["timestamp"]))
        content.timestamp = rendezvous::round::unix_time(*seconds);
    }
  }
  if (content.message.empty())
    content.message = "<N/A>";
  return content;
}

std::optional<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::string text(max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max_bytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::optional<ErrorFileContent> read_error_file(const std::string& path) {
  if (path.empty())
    return std::nullopt;
  auto text = read_text_file(path, kMaxErrorFileBytes);
  if (!text)
    return std::nullopt;
  return parse_error_file(*text);
}

std::string agent_error_file_json(const std::string& worker_file_json, const std::string& message,
                                  UnixTime timestamp, int error_code) {
  auto doc = nlohmann::json::parse(worker_file_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded() && doc.is_object() && doc.contains("message") &&
      doc["message"].is_object()) {
    doc["message"]["errorCode"] = error_code;
    return doc.dump();
  }
  const auto whole_seconds = static_cast<long long>(timestamp.time_since_epoch().count());
  nlohmann::json synthesized = {
      {"message",
       {{"message", message},
        {"extraInfo", {{"py_callstack", message}, {"timestamp", std::to_string(whole_seconds)}}}}}};
  return synthesized.dump();
}

bool write_text_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      return false;
    out << text;
    if (!out.flush())
      return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

}  // namespace ddprun::agent
