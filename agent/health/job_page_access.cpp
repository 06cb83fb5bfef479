#include "agent/health/job_page_access.hpp"

#include <cctype>

#include "rendezvous/store/sha256.hpp"

namespace ddprun::agent {
namespace {

constexpr std::size_t kTokenBytes = 16;

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

std::string_view query_token(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  const auto first_space = line.find(' ');
  if (first_space == std::string_view::npos)
    return {};
  std::string_view target = line.substr(first_space + 1);
  target = target.substr(0, target.find(' '));
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
