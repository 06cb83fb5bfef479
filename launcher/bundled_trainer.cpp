#include "launcher/bundled_trainer.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

#include "common/text.hpp"
#include "launcher/child_process.hpp"
#include "launcher/usage_error.hpp"

namespace ddprun::launcher {
namespace {

// The builder prints one path; more than this is not a path.
constexpr size_t kMaxBuilderOutput = 4096;

bool is_executable(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

bool is_file(const std::string& path) {
  return ::access(path.c_str(), R_OK) == 0;
}

}  // namespace

TrainerBuilder builder_for(const TrainerSearch& search, bool python_beside_ddprun) {
  TrainerBuilder builder;
  const std::string share = search.executable_dir + "/../share/ddprun";
  builder.script = share + "/build_against_torch.py";
  builder.source = share + "/trainer-source";
  if (search.python_exec && !search.python_exec->empty())
    builder.python = *search.python_exec;
  else if (python_beside_ddprun)
    builder.python = search.executable_dir + "/python3";
  else
    builder.python = search.python3_on_path.value_or("python3");
  return builder;
}

std::string provide_bundled_trainer(const TrainerSearch& search) {
  if (is_executable(search.beside_ddprun))
    return search.beside_ddprun;
  const TrainerBuilder builder =
      builder_for(search, is_executable(search.executable_dir + "/python3"));
  if (!is_file(builder.script)) {
    throw UsageError("train",
                     search.beside_ddprun + " is not installed, and there is no " + builder.script +
                         " to build it",
                     "ddprun-train beside ddprun (scripts/build.sh), or ddprun installed with "
                     "pip, which builds it against your torch (README: On a cluster, without "
                     "root)");
  }
  const ChildResult run =
      run_child({builder.python, builder.script, "--source", builder.source}, kMaxBuilderOutput);
  if (!WIFEXITED(run.wait_status) || WEXITSTATUS(run.wait_status) != 0) {
    throw std::runtime_error("ddprun-train could not be provided for " + builder.python +
                             "'s torch (the reason is above); nothing was started");
  }
  const std::string path(common::trim(run.out));
  if (path.empty() || path.front() != '/' || path.find('\n') != std::string::npos ||
      !is_executable(path)) {
    throw std::runtime_error(builder.script + " printed no executable ddprun-train path (\"" +
                             path + "\"); nothing was started");
  }
  return path;
}

}  // namespace ddprun::launcher
