#pragma once
// --print-config: the resolved LaunchConfig as JSON, every field, plus value_sources.

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

nlohmann::json launch_config_to_json(const LaunchConfig& config);

// "python_script", "python_module", "binary" or "bundled_trainer".
std::string entry_kind_name(EntryKind kind);

}  // namespace ddprun::launcher
