#pragma once
// Who may look at the job page (/job/ on the health port). With a job secret, the page and its
// API require a token derived from the secret: HMAC-SHA256(secret, "ddprun job page"), its
// first 16 bytes in hex. The agent prints the page's URL with it; whoever holds the secret can
// compute it, and the token tells nothing of the secret. Without a secret the page is open to
// whoever reaches the port, like the health check. Pure.

#include <string>
#include <string_view>

namespace ddprun::agent {

// "" for no secret: then every request may look.
std::string job_page_token(std::string_view secret);

// The token a request's head presents: "token=..." in the target's query, or an
// "Authorization: Bearer ..." header; "" when it presents none.
std::string_view presented_token(std::string_view head);

// Whether the head may see the page; compared in constant time.
bool may_view_job_page(std::string_view head, const std::string& token);

}  // namespace ddprun::agent
