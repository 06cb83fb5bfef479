#include "launcher/credentials.hpp"

#include <string>

#include "common/key_material.hpp"

namespace ddprun::launcher {

void take_credentials_out_of_process_environment() {
  for (const std::string_view name : kCredentialVariables)
    common::erase_from_process_environment(name);
}

void wipe_credentials(Environment& env) {
  for (const std::string_view name : kCredentialVariables) {
    const auto entry = env.find(std::string(name));
    if (entry == env.end())
      continue;
    common::wipe(entry->second);
    env.erase(entry);
  }
}

void wipe_credentials(LaunchConfig& config) {
  if (config.rdzv_secret)
    common::wipe(config.rdzv_secret->value);
  if (config.etcd)
    common::wipe(config.etcd->auth.password);
}

bool holds_credentials(const LaunchConfig& config) {
  return (config.rdzv_secret && !config.rdzv_secret->value.empty()) ||
         (config.etcd && !config.etcd->auth.password.empty());
}

}  // namespace ddprun::launcher
