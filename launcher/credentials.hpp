#pragma once
// The job secret and etcd's password in the launcher's hands: they leave ddprun's environment
// as soon as it is copied, so no process ddprun starts (workers, node checks, stack tools)
// inherits them; the copies the launcher made are wiped once the agent's configuration holds
// its own; and the process that holds them is not dumpable.

#include <string_view>

#include "launcher/environment.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

// The variables that carry key material. DDPRUN_RDZV_SECRET_FILE, a path, is not one of them.
inline constexpr std::string_view kCredentialVariables[] = {"DDPRUN_RDZV_SECRET",
                                                            "DDPRUN_ETCD_PASSWORD"};

// Wipes and removes kCredentialVariables from this process's environment (before any thread or
// child exists): every process started later inherits an environment without them.
void take_credentials_out_of_process_environment();

// Wipes the values of kCredentialVariables in the launcher's copy of the environment and drops
// them, once the secret and the password have been read from it.
void wipe_credentials(Environment& env);

// Wipes the secret and the password in a configuration whose agent configuration has been built.
void wipe_credentials(LaunchConfig& config);

// Whether the configuration holds a job secret or an etcd password.
bool holds_credentials(const LaunchConfig& config);

}  // namespace ddprun::launcher
