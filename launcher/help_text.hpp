#pragma once
// The --help text, generated from the option table and grouped for a user.

#include <string>

namespace ddprun::launcher {

std::string help_text();
// `ddprun stacks --help`.
std::string stacks_help_text();

}  // namespace ddprun::launcher
