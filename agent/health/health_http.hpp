#pragma once
// The little HTTP the health-check server speaks, as pure functions: where a request's head
// ends, what it asks for, and the response and JSON body it gets. Requests come from the
// network, so nothing here trusts them: junk is kMalformed, never an exception.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/health/health_board.hpp"

namespace ddprun::agent {

enum class HealthRequest {
  kGet,        // its path says what is asked for (route_of)
  kPost,       // only the job page's stacks button posts (to /job/api/stacks)
  kOtherVerb,  // a well-formed request line with another method: 405
  kMalformed,  // not an HTTP request line: 400
};

// What a GET's path asks for.
enum class HealthRoute {
  kHealth,           // "/", "/health", "/healthz": the health report
  kMetrics,          // "/metrics": Prometheus' text format (prometheus_text.hpp)
  kJobPage,          // "/job/": the job page (job_page_html.hpp)
  kJobPageRedirect,  // "/job": to "/job/", where the page's relative links resolve
  kJobState,         // "/job/api/state": its JSON (job_api.hpp)
  kJobStacks,        // "/job/api/stacks": GET where the last request stands, POST a new one
  kNotFound,         // anything else: 404
};

// Where the head (request line and headers) ends, past its blank line ("\r\n\r\n", or "\n\n"
// from clients that send bare line feeds); npos while it has not ended.
std::size_t end_of_head(std::string_view received);

// What the head's request line, "METHOD TARGET HTTP/x.y", asks for.
HealthRequest classify_request(std::string_view head);

// A well-formed head's target, as sent ("/job/api/state?token=..."), and its path without its
// query ("?...") or fragment.
std::string_view request_target(std::string_view head);
std::string_view request_path(std::string_view head);
// The value of the head's header `name` (any case), without leading blanks; "" when absent.
std::string_view header_value(std::string_view head, std::string_view name);
HealthRoute route_of(std::string_view path);

// {"alive": ..., "last_progress_unix": ..., "stale_after_s": ..., "round": ..., "restarts": ...,
//  "workers": {"<local_rank>": "<state>"}}
std::string health_body(const HealthState& state, bool alive, int64_t last_progress_unix_s,
                        double stale_after_s);

// A complete HTTP/1.0 response that closes the connection: status line, Content-Type,
// Content-Length, Connection: close (and Allow: GET for 405), then the body.
// content_type: JSON by default; kPlainText for short messages.
inline constexpr const char* kPlainText = "text/plain; charset=utf-8";
inline constexpr const char* kHtml = "text/html; charset=utf-8";
std::string http_response(int status, std::string_view body,
                          std::string_view content_type = "application/json");
// 302 to `location` (a path on this server).
std::string redirect_response(std::string_view location);

}  // namespace ddprun::agent
