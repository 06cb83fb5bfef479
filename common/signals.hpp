#pragma once
// Signal names as glibc knows them (sigabbrev_np), from a table of our own (glibc 2.28 has no
// sigabbrev_np): one table for the whole project.

#include <optional>
#include <string>
#include <string_view>

namespace ddprun::common {

// "SIGTERM" for 15; "SIG<n>" for a number glibc has no name for (a real-time signal).
std::string signal_name(int signal_number);

// 15 for "SIGTERM"; nullopt for anything that is not a signal's name.
std::optional<int> signal_number(std::string_view name);

}  // namespace ddprun::common
