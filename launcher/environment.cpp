#include "launcher/environment.hpp"

#include <string_view>

namespace ddprun::launcher {

Environment environment_from(char* const* envp) {
  Environment env;
  for (; envp != nullptr && *envp != nullptr; ++envp) {
    std::string_view entry(*envp);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      continue;
    // The first definition wins, as getenv() sees it.
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

}  // namespace ddprun::launcher
