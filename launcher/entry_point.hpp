#pragma once
// The command every worker runs, from the entry point and torchrun's rules:
//   script            -> <python> -u script args      (<python>: $PYTHON_EXEC, else python3 on
//   PATH) -m module         -> <python> -u -m module args
//   --no-python prog  -> prog args
//   --run-path script -> <python> -u script args      (wins over -m and --no-python, as in
//   torchrun) train             -> <directory of ddprun>/ddprun-train args
// Arguments after the entry point are passed through untouched.

#include <optional>
#include <string>
#include <vector>

#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

struct EntryPointRequest {
  std::string entry_point;
  std::vector<std::string> args;
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::optional<std::string> python_exec;      // $PYTHON_EXEC
  std::optional<std::string> python3_on_path;  // what PATH finds for python3
  std::string executable_dir;                  // where ddprun (and ddprun-train) live
};

struct EntryPlan {
  EntryKind kind = EntryKind::kPythonScript;
  std::vector<std::string> worker_argv;
};

inline constexpr const char* kBundledTrainerWord = "train";
inline constexpr const char* kBundledTrainerProgram = "ddprun-train";

// Throws UsageError for -m together with --no-python.
EntryPlan plan_entry_point(const EntryPointRequest& request);

}  // namespace ddprun::launcher
