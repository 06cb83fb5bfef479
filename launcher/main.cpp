// ddprun's composition root: the one place where the launcher and the agent meet. It parses and
// checks the command line (launcher/), builds the agent's own configuration from it
// (launcher/agent_config_builder) and runs the agent (agent/agent.hpp). The decisions live in
// the libraries; this file only does the I/O.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/agent.hpp"
#include "agent/stacks/stacks_command.hpp"
#include "common/key_material.hpp"
#include "launcher/agent_config_builder.hpp"
#include "launcher/bundled_trainer.hpp"
#include "launcher/command_line.hpp"
#include "launcher/config_json.hpp"
#include "launcher/credentials.hpp"
#include "launcher/environment.hpp"
#include "launcher/etcd_password.hpp"
#include "launcher/help_text.hpp"
#include "launcher/host_facts.hpp"
#include "launcher/launch_config.hpp"
#include "launcher/resolve_config.hpp"
#include "launcher/trainer_check.hpp"
#include "launcher/usage_error.hpp"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadCommandLine = 2;

// From here on this process holds the job secret or etcd's password: no core file, and no
// debugger of the same user, may read them out of its memory. Its children are dumpable again
// after execve, so the stack tools still attach to the workers.
bool keep_credentials_out_of_dumps(const ddprun::launcher::LaunchConfig& config) {
  if (!ddprun::launcher::holds_credentials(config) || ddprun::common::make_not_dumpable())
    return true;
  std::cerr << "ddprun: error: prctl(PR_SET_DUMPABLE, 0) failed: " << std::strerror(errno)
            << "; expected to keep the job secret and etcd's password out of core dumps\n";
  return false;
}

void print_warning(const std::string& warning) {
  // torchrun's OMP_NUM_THREADS banner starts with a newline; keep its shape.
  std::cerr << "ddprun: warning:" << (warning.starts_with('\n') ? "" : " ") << warning << '\n';
}

// `ddprun stacks [rendezvous options]`: the same options as a launch, parsed the same way; the
// subcommand stands in for the entry point.
int run_stacks_command(const std::vector<std::string>& args, ddprun::launcher::Environment& env) {
  namespace launcher = ddprun::launcher;
  launcher::ResolvedLaunch resolved;
  launcher::TrainerSearch trainer_search;
  try {
    launcher::ParsedCommandLine parsed = launcher::parse_command_line(args, env);
    if (parsed.has("help")) {
      std::cout << launcher::stacks_help_text();
      return 0;
    }
    if (parsed.entry_point)
      throw launcher::UsageError(*parsed.entry_point, "ddprun stacks takes no entry point",
                                 "rendezvous options only (ddprun stacks --help)");
    parsed.entry_point = "stacks";
    resolved = launcher::resolve_launch(parsed, env, launcher::probe_host(env, {}));
    launcher::load_etcd_password(resolved.config, env);
  } catch (const std::exception& error) {
    std::cerr << "ddprun stacks: error: " << error.what() << '\n';
    return kExitBadCommandLine;
  }
  launcher::wipe_credentials(env);
  if (!keep_credentials_out_of_dumps(resolved.config))
    return kExitFailure;
  const ddprun::agent::AgentConfig agent_config = launcher::build_agent_config(resolved.config);
  launcher::wipe_credentials(resolved.config);
  return ddprun::agent::request_stacks(agent_config.rendezvous, std::cout, std::cerr);
}

// Runs one step of `train`'s preparation: 0, or the exit status after its error is printed
// (2 for a usage error, 1 for anything else).
int train_step(const std::function<void()>& step) {
  try {
    step();
    return 0;
  } catch (const ddprun::launcher::UsageError& error) {
    std::cerr << "ddprun: error: " << error.what() << '\n';
    return kExitBadCommandLine;
  } catch (const std::exception& error) {
    std::cerr << "ddprun: error: train: " << error.what() << '\n';
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace launcher = ddprun::launcher;
  const std::vector<std::string> args(argv + 1, argv + argc);
  launcher::Environment env = launcher::environment_from(environ);
  // Copied into `env`, the credentials leave the process's environment before anything starts:
  // no worker, node check or stack tool inherits them, whatever spawns it.
  launcher::take_credentials_out_of_process_environment();
  if (!args.empty() && args.front() == "stacks")
    return run_stacks_command({args.begin() + 1, args.end()}, env);

  launcher::ResolvedLaunch resolved;
  launcher::TrainerSearch trainer_search;
  try {
    const launcher::ParsedCommandLine parsed = launcher::parse_command_line(args, env);
    if (parsed.has("help")) {
      std::cout << launcher::help_text();
      return 0;
    }
    if (parsed.has("version")) {
      std::cout << "ddprun " << DDPRUN_VERSION << '\n';
      return 0;
    }
    const launcher::ProbeRequest probe{.numa_topology = parsed.has("numa_binding")};
    const launcher::HostFacts facts = launcher::probe_host(env, probe);
    resolved = launcher::resolve_launch(parsed, env, facts);
    trainer_search = {.beside_ddprun = resolved.config.worker_argv.front(),
                      .executable_dir = facts.executable_dir,
                      .python_exec = launcher::lookup(env, "PYTHON_EXEC"),
                      .python3_on_path = facts.python3_on_path};
    launcher::load_etcd_password(resolved.config, env);
    launcher::wipe_credentials(env);
    if (parsed.has("print_config")) {
      // The plan, even where the trainer is not built (yet).
      for (const auto& warning : resolved.warnings)
        print_warning(warning);
      std::cout << launcher::launch_config_to_json(resolved.config).dump(2) << '\n';
      return 0;
    }
  } catch (const launcher::UsageError& error) {
    std::cerr << "ddprun: error: " << error.what() << '\n';
    return kExitBadCommandLine;
  } catch (const std::exception& error) {
    // Anything else while reading the command line is still a command-line problem.
    std::cerr << "ddprun: error: command line: " << error.what()
              << "; expected the forms listed by ddprun --help\n";
    return kExitBadCommandLine;
  }
  const bool bundled_trainer =
      resolved.config.entry_kind == ddprun::agent::EntryKind::kBundledTrainer;
  // The trainer is found (or built) before anything else is said: a job that cannot have one
  // stops with that message alone.
  if (bundled_trainer) {
    const int status = train_step([&] {
      resolved.config.worker_argv.front() = launcher::provide_bundled_trainer(trainer_search);
    });
    if (status != 0)
      return status;
  }
  for (const auto& warning : resolved.warnings)
    print_warning(warning);
  std::cout.flush();
  if (bundled_trainer) {
    const int status =
        train_step([&] { launcher::check_trainer_config(resolved.config.worker_argv); });
    if (status != 0)
      return status;
  }
  if (!keep_credentials_out_of_dumps(resolved.config))
    return kExitFailure;
  const ddprun::agent::AgentConfig agent_config = launcher::build_agent_config(resolved.config);
  launcher::wipe_credentials(resolved.config);  // the agent's configuration holds its own copy
  return ddprun::agent::run_agent(agent_config);
}
