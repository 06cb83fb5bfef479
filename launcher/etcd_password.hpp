#pragma once
// The etcd user's password, read where the launcher does its I/O (after resolve_launch):
// from rdzv_conf password_file, which must not be readable by group or others (a password in a
// world-readable file is no secret), or else from the environment variable
// DDPRUN_ETCD_PASSWORD. Never from the command line, which every user of the machine can read.

#include "launcher/environment.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

// Fills config.etcd->auth.password when an etcd user is configured; throws UsageError naming
// the file or the variable when there is no usable password.
void load_etcd_password(LaunchConfig& config, const Environment& env);

}  // namespace ddprun::launcher
