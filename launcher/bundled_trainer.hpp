#pragma once
// `ddprun ... train`: which ddprun-train the workers run. A build from source has it beside
// ddprun. A pip installation has none (the trainer links LibTorch, and the user's torch is
// theirs): it has the trainer's sources and worker-runtime/build_against_torch.py under
// <prefix>/share/ddprun, and that script, run with the environment's Python, prints the path of
// a ddprun-train compiled against that Python's torch, building it into the user's cache on
// first use (minutes, once; progress and errors on stderr). Resolved once, before the
// rendezvous, so that no worker of any restart waits for a build.

#include <optional>
#include <string>

namespace ddprun::launcher {

struct TrainerSearch {
  std::string beside_ddprun;                   // <directory of ddprun>/ddprun-train
  std::string executable_dir;                  // directory of the running ddprun
  std::optional<std::string> python_exec;      // $PYTHON_EXEC: the workers' Python, if set
  std::optional<std::string> python3_on_path;  // what PATH finds for python3
};

// The pip installation's builder, where ddprun-train is not beside ddprun.
struct TrainerBuilder {
  std::string python;  // $PYTHON_EXEC, else <directory of ddprun>/python3, else python3 on PATH
  std::string script;  // <prefix>/share/ddprun/build_against_torch.py
  std::string source;  // <prefix>/share/ddprun/trainer-source
};

// Where the builder would be for ddprun in `executable_dir` (pure: no file is looked at).
TrainerBuilder builder_for(const TrainerSearch& search, bool python_beside_ddprun);

// The path of the ddprun-train to run: the one beside ddprun, else the builder's. Throws
// UsageError (exit 2) when neither exists, and std::runtime_error when the builder failed (it
// said why on stderr) or printed no executable path.
std::string provide_bundled_trainer(const TrainerSearch& search);

}  // namespace ddprun::launcher
