#include "agent/health/health_http.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace ddprun::agent {

namespace {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 302:
      return "Found";
    case 202:
      return "Accepted";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

bool is_method_char(char c) {
  return (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
}

}  // namespace

std::size_t end_of_head(std::string_view received) {
  const auto crlf = received.find("\r\n\r\n");
  const auto lf = received.find("\n\n");
  if (crlf == std::string_view::npos && lf == std::string_view::npos)
    return std::string_view::npos;
  return std::min(crlf == std::string_view::npos ? std::string_view::npos : crlf + 4,
                  lf == std::string_view::npos ? std::string_view::npos : lf + 2);
}

HealthRequest classify_request(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  const auto first_space = line.find(' ');
  if (first_space == 0 || first_space == std::string_view::npos)
    return HealthRequest::kMalformed;
  const std::string_view method = line.substr(0, first_space);
  const std::string_view rest = line.substr(first_space + 1);
  const auto second_space = rest.find(' ');
  if (second_space == 0 || second_space == std::string_view::npos ||
      !std::all_of(method.begin(), method.end(), is_method_char) ||
      !rest.substr(second_space + 1).starts_with("HTTP/"))
    return HealthRequest::kMalformed;
  if (method == "GET")
    return HealthRequest::kGet;
  return method == "POST" ? HealthRequest::kPost : HealthRequest::kOtherVerb;
}

std::string_view request_target(std::string_view head) {
  const std::string_view line = head.substr(0, head.find('\n'));
  const auto first_space = line.find(' ');
  if (first_space == std::string_view::npos)
    return {};
  const std::string_view target = line.substr(first_space + 1);
  return target.substr(0, target.find(' '));
}

std::string_view header_value(std::string_view head, std::string_view name) {
  std::size_t at = head.find('\n');
  while (at != std::string_view::npos && at + 1 < head.size()) {
    const std::size_t start = at + 1;
    const std::size_t end = head.find('\n', start);
    std::string_view line = head.substr(start, end == std::string_view::npos ? end : end - start);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    const auto colon = line.find(':');
    if (colon == name.size()) {
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(line[i])) ==
               std::tolower(static_cast<unsigned char>(name[i]));
      if (same) {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
          value.remove_prefix(1);
        return value;
      }
    }
    at = end;
  }
  return {};
}

std::string_view request_path(std::string_view head) {
  const std::string_view target = request_target(head);
  return target.substr(0, target.find_first_of("?#"));
}

HealthRoute route_of(std::string_view path) {
  if (path == "/" || path == "/health" || path == "/healthz")
    return HealthRoute::kHealth;
  if (path == "/metrics")
    return HealthRoute::kMetrics;
  if (path == "/job/")
    return HealthRoute::kJobPage;
  if (path == "/job")
    return HealthRoute::kJobPageRedirect;
  if (path == "/job/api/state")
    return HealthRoute::kJobState;
  if (path == "/job/api/stacks")
    return HealthRoute::kJobStacks;
  return HealthRoute::kNotFound;
}

std::string health_body(const HealthState& state, bool alive, int64_t last_progress_unix_s,
                        double stale_after_s) {
  nlohmann::json workers = nlohmann::json::object();
  for (const auto& [local_rank, worker] : state.workers)
    workers[std::to_string(local_rank)] = worker.state;
  const nlohmann::json body = {
      {"alive", alive},
      {"last_progress_unix", last_progress_unix_s},
      {"stale_after_s", stale_after_s},
      {"round", state.round ? nlohmann::json(*state.round) : nlohmann::json()},
      {"restarts", state.restarts},
      {"workers", workers}};
  return body.dump() + "\n";
}

std::string http_response(int status, std::string_view body, std::string_view content_type) {
  std::string response = "HTTP/1.0 " + std::to_string(status) + " ";
  response.append(reason_phrase(status)).append("\r\nContent-Type: ").append(content_type);
  response.append("\r\nContent-Length: ").append(std::to_string(body.size()));
  if (status == 405)
    response.append("\r\nAllow: GET");
  response.append("\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff");
  // The job page reaches nothing but this agent, whatever a value shown in it holds.
  if (content_type == kHtml)
    response.append(
        "\r\nContent-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:");
  response.append("\r\nConnection: close\r\n\r\n").append(body);
  return response;
}

std::string redirect_response(std::string_view location) {
  std::string response = "HTTP/1.0 302 Found\r\nLocation: ";
  response.append(location).append("\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  return response;
}

}  // namespace ddprun::agent
