#include "agent/health/job_page_access.hpp"

#include "agent/health/health_http.hpp"
#include "rendezvous/store/sha256.hpp"

namespace ddprun::agent {
namespace {

constexpr std::size_t kTokenBytes = 16;

std::string_view query_token(std::string_view head) {
  std::string_view target = request_target(head);
  target = target.substr(0, target.find('#'));
  const auto question = target.find('?');
  if (question == std::string_view::npos)
    return {};
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.starts_with("token="))
      return pair.substr(6);
    if (amp == std::string_view::npos)
      break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

}  // namespace

std::string job_page_token(std::string_view secret) {
  if (secret.empty())
    return {};
  const auto mac = rendezvous::store::hmac_sha256(secret, "ddprun job page");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (std::size_t i = 0; i < kTokenBytes; ++i) {
    token += kHex[mac[i] >> 4];
    token += kHex[mac[i] & 0xF];
  }
  return token;
}

std::string_view presented_token(std::string_view head) {
  if (const auto from_query = query_token(head); !from_query.empty())
    return from_query;
  const std::string_view authorization = header_value(head, "Authorization");
  if (authorization.starts_with("Bearer "))
    return authorization.substr(7);
  return {};
}

bool may_view_job_page(std::string_view head, const std::string& token) {
  if (token.empty())
    return true;
  return rendezvous::store::equal_in_constant_time(presented_token(head), token);
}

}  // namespace ddprun::agent
