#pragma once
// The process environment as an explicit value, so that every decision that depends on it
// (PET_* defaults, Slurm, PYTHON_EXEC, OMP_NUM_THREADS) can be unit-tested with a plain map.

#include <map>
#include <optional>
#include <string>

namespace ddprun::launcher {

using Environment = std::map<std::string, std::string>;

// The value of `name`, or nothing when it is unset.
inline std::optional<std::string> lookup(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end())
    return std::nullopt;
  return it->second;
}

// Copies a NULL-terminated `environ`-style array (entries without '=' are skipped).
Environment environment_from(char* const* envp);

}  // namespace ddprun::launcher
