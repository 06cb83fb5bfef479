#include "launcher/entry_point.hpp"

#include "launcher/usage_error.hpp"

namespace ddprun::launcher {

EntryPlan plan_entry_point(const EntryPointRequest& request) {
  EntryPlan plan;
  const std::string python = request.python_exec && !request.python_exec->empty()
                                 ? *request.python_exec
                                 : request.python3_on_path.value_or("python3");
  if (request.run_path) {
    plan.kind = EntryKind::kPythonScript;
    plan.worker_argv = {python, "-u", request.entry_point};
  } else if (request.module && request.no_python) {
    throw UsageError("-m/--module", "cannot be combined with --no-python",
                     "either -m MODULE (run with python) or --no-python PROGRAM");
  } else if (request.no_python) {
    plan.kind = EntryKind::kBinary;
    plan.worker_argv = {request.entry_point};
  } else if (request.module) {
    plan.kind = EntryKind::kPythonModule;
    plan.worker_argv = {python, "-u", "-m", request.entry_point};
  } else if (request.entry_point == kBundledTrainerWord) {
    plan.kind = EntryKind::kBundledTrainer;
    plan.worker_argv = {request.executable_dir + "/" + kBundledTrainerProgram};
  } else {
    plan.kind = EntryKind::kPythonScript;
    plan.worker_argv = {python, "-u", request.entry_point};
  }
  plan.worker_argv.insert(plan.worker_argv.end(), request.args.begin(), request.args.end());
  return plan;
}

}  // namespace ddprun::launcher
