#include "common/signals.hpp"

#include <signal.h>
#include <string.h>

namespace ddprun::common {

std::string signal_name(int signal_number) {
  const char* abbrev = ::sigabbrev_np(signal_number);
  if (abbrev == nullptr)
    return "SIG" + std::to_string(signal_number);
  return std::string("SIG") + abbrev;
}

std::optional<int> signal_number(std::string_view name) {
  if (!name.starts_with("SIG"))
    return std::nullopt;
  name.remove_prefix(3);
  for (int number = 1; number < NSIG; ++number) {
    const char* abbrev = ::sigabbrev_np(number);
    if (abbrev != nullptr && name == abbrev)
      return number;
  }
  return std::nullopt;
}

}  // namespace ddprun::common
