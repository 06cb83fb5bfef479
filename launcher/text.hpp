#pragma once
// String building for messages. cat() appends its parts into one string; it also sidesteps
// GCC 12's false -Wrestrict on `"literal" + std::string(...)` (GCC bug 105651) under -Werror.

#include <string>
#include <string_view>

namespace ddprun::launcher {

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

}  // namespace ddprun::launcher
