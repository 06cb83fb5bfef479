#pragma once
// The job page itself: one static HTML document with its CSS and JavaScript inline, compiled
// into ddprun (no CDN, no network beyond the agent). It polls /job/api/state (job_api.hpp) every
// 2 s while the browser shows it, and never otherwise; it writes every value as text (never as
// HTML), so a node name with markup in it shows as the characters it is.

#include <string_view>

namespace ddprun::agent {

std::string_view job_page_html();

}  // namespace ddprun::agent
