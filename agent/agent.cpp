// The run loop: rendezvous, start the workers, watch them together with the rendezvous and
// the agent's signals, and restart, re-form or finish the job. Decisions come from
// run_policy; this file only sequences them and does the I/O.

#include "agent/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "agent/error_file.hpp"
#include "agent/event_log.hpp"
#include "agent/failure_summary.hpp"
#include "agent/interruptible_call.hpp"
#include "agent/log_layout.hpp"
#include "agent/log_prefix.hpp"
#include "agent/rendezvous_handler.hpp"
#include "agent/run_policy.hpp"
#include "agent/signal_channel.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_group.hpp"

namespace ddprun::agent {

namespace {

using Seconds = std::chrono::duration<double>;

// How long an agent stopped by a signal waits to leave the rendezvous before exiting anyway.
constexpr std::chrono::milliseconds kLeaveLimit{2000};

std::vector<int> signals_to_forward(const launcher::LaunchConfig& config) {
  std::vector<int> handled = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (int sig : config.signals_to_handle) {
    if (std::find(handled.begin(), handled.end(), sig) == handled.end())
      handled.push_back(sig);
  }
  return handled;
}

std::string this_host(const launcher::LaunchConfig& config) {
  if (config.local_addr && !config.local_addr->empty())
    return *config.local_addr;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "localhost";
  return name;
}

std::string entry_name(const launcher::LaunchConfig& config) {
  std::string entry = config.entry_point;
  if (entry.empty() && !config.worker_argv.empty())
    entry = config.worker_argv.front();
  return std::filesystem::path(entry).filename().string();
}

nlohmann::json round_fields(const RoundInfo& round) {
  return {{"round", round.round},
          {"group_rank", round.group_rank},
          {"group_world_size", round.group_world_size},
          {"world_size", round.world_size},
          {"restart_count", round.restart_count},
          {"master_addr", round.master_addr},
          {"master_port", round.master_port},
          {"run_id", round.run_id}};
}

nlohmann::json failure_fields(const WorkerFailure& failure) {
  return {{"rank", failure.global_rank},    {"local_rank", failure.local_rank},
          {"exit_code", failure.exit_code}, {"pid", failure.pid},
          {"host", failure.host},           {"message", failure.message}};
}

class AgentRun {
 public:
  AgentRun(const launcher::LaunchConfig& config, SignalChannel& signals, EventLog& events)
      : config_(config),
        signals_(signals),
        events_(events),
        host_(this_host(config)),
        logs_(config.log_dir),
        inherited_env_(current_process_env()) {
    const char* templ = std::getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
    prefix_template_ = templ != nullptr ? templ : std::string(kDefaultPrefixTemplate);
  }

  int run();

 private:
  enum class RoundEnd { kNextRound, kFinished };

  RoundEnd run_round(RendezvousHandler& handler, const RoundInfo& round);
  std::vector<WorkerLaunch> plan_workers(const RoundInfo& round);
  std::vector<WorkerFailure> local_failures(const WorkerGroup& group) const;
  int finish_with_signal(RendezvousHandler* handler, WorkerGroup* group, int sig);
  int fail_job(RendezvousHandler& handler);
  [[noreturn]] void exit_during_rendezvous(int sig);
  void write_agent_error_file(const std::vector<WorkerFailure>& failures) const;
  int finish(int status, const std::string& reason);

  const launcher::LaunchConfig& config_;
  SignalChannel& signals_;
  EventLog& events_;
  std::string host_;
  LogDirectory logs_;
  EnvMap inherited_env_;
  std::string prefix_template_;
  int exit_status_ = kExitFailure;
};

int AgentRun::finish(int status, const std::string& reason) {
  events_.record("exit", {{"exit_code", status}, {"reason", reason}});
  exit_status_ = status;
  return status;
}

void AgentRun::exit_during_rendezvous(int sig) {
  // No workers run during a rendezvous. Leaving without closing lets the others scale down;
  // the handler's threads cannot be joined mid-call, so the process ends here.
  std::fprintf(stderr, "ddprun: received %s during rendezvous, exiting\n",
               signal_name(sig).c_str());
  finish(exit_status_for_signal(sig), "signal " + signal_name(sig));
  std::fflush(nullptr);
  std::_Exit(exit_status_for_signal(sig));
}

std::vector<WorkerLaunch> AgentRun::plan_workers(const RoundInfo& round) {
  if (config_.worker_argv.empty())
    throw std::runtime_error("no worker command was given");
  const std::string attempt_dir =
      logs_.prepare_attempt(round.run_id, round.restart_count, config_.nproc_per_node);
  std::vector<WorkerLaunch> launches;
  for (int local_rank = 0; local_rank < config_.nproc_per_node; ++local_rank) {
    WorkerLaunch launch;
    launch.local_rank = local_rank;
    launch.global_rank = round.base_global_rank + local_rank;
    launch.argv = config_.worker_argv;
    launch.logs = plan_worker_logs(config_, attempt_dir, local_rank);
    launch.env =
        build_worker_env(config_, round, {inherited_env_, local_rank, launch.logs.error_file});
    launch.console_prefix = expand_prefix_template(
        prefix_template_, {config_.role, launch.global_rank, local_rank, host_});
    launches.push_back(std::move(launch));
  }
  return launches;
}

std::vector<WorkerFailure> AgentRun::local_failures(const WorkerGroup& group) const {
  std::vector<WorkerFailure> failures;
  for (const auto& worker : group.workers()) {
    if (!worker.exit || worker.exit->succeeded() || worker.stopped_by_agent)
      continue;
    WorkerFailure failure;
    failure.timestamp_s = worker.exit_time_s;
    failure.host = host_;
    failure.global_rank = worker.global_rank;
    failure.local_rank = worker.local_rank;
    failure.exit_code = worker.exit->exit_code;
    failure.pid = worker.pid;
    failure.message = default_failure_message(*worker.exit, worker.pid);
    if (auto content = read_error_file(worker.error_file)) {
      failure.error_file = worker.error_file;
      failure.message = content->message;
      if (content->timestamp_s)
        failure.timestamp_s = *content->timestamp_s;
    }
    failures.push_back(std::move(failure));
  }
  std::sort(failures.begin(), failures.end(),
            [](const auto& a, const auto& b) { return a.timestamp_s < b.timestamp_s; });
  return failures;
}

void AgentRun::write_agent_error_file(const std::vector<WorkerFailure>& failures) const {
  // torchrun's @record on main: the scheduler above may have given the agent its own file.
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0' || failures.empty())
    return;
  const WorkerFailure& root = failures.front();
  std::string worker_json;
  if (!root.error_file.empty()) {
    worker_json = read_text_file(root.error_file, 1 << 20).value_or("");
  }
  const int code = root.exit_code;
  write_text_file(path, agent_error_file_json(worker_json, root.message, root.timestamp_s, code));
}

int AgentRun::fail_job(RendezvousHandler& handler) {
  std::vector<WorkerFailure> failures = handler.job_failures();
  std::fputs(format_failure_summary(entry_name(config_), failures).c_str(), stderr);
  std::fflush(stderr);
  write_agent_error_file(failures);
  handler.shutdown(true);
  return finish(kExitFailure, "workers failed");
}

int AgentRun::finish_with_signal(RendezvousHandler* handler, WorkerGroup* group, int sig) {
  std::fprintf(stderr, "ddprun: received %s, stopping the workers\n", signal_name(sig).c_str());
  events_.record("signal", {{"signal", signal_name(sig)}});
  // The same signal first (a trainer snapshots on SIGTERM), SIGKILL after the timeout.
  if (group != nullptr)
    group->stop(sig, Seconds(config_.shutdown_timeout_s));
  const int status = exit_status_for_signal(sig);
  // Leaving is best effort: a store host that is itself going away must not keep a
  // preempted agent alive, so the exit goes ahead after a short bound.
  if (handler != nullptr &&
      !call_with_deadline([handler] { handler->shutdown(false); }, kLeaveLimit)) {
    std::fprintf(stderr, "ddprun: leaving the rendezvous timed out, exiting anyway\n");
    finish(status, "signal " + signal_name(sig));
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return finish(status, "signal " + signal_name(sig));
}

AgentRun::RoundEnd AgentRun::run_round(RendezvousHandler& handler, const RoundInfo& round) {
  WorkerGroup group(plan_workers(round), signals_);
  {
    nlohmann::json fields = round_fields(round);
    nlohmann::json pids = nlohmann::json::array();
    for (const auto& worker : group.workers())
      pids.push_back(worker.pid);
    fields["pids"] = pids;
    events_.record("workers_started", fields);
  }
  const Seconds shutdown_timeout(config_.shutdown_timeout_s);
  RoundSignal round_signal = handler.poll();
  for (;;) {
    switch (decide(group.state(), round_signal)) {
      case LoopAction::kKeepRunning:
        break;
      case LoopAction::kExitBarrier: {
        events_.record("workers_succeeded", {{"round", round.round}});
        auto barrier = call_interruptibly<bool>(signals_, [&] {
          handler.exit_barrier(Seconds(config_.exit_barrier_timeout_s));
          return true;
        });
        if (auto* sig = std::get_if<int>(&barrier)) {
          finish_with_signal(nullptr, nullptr, *sig);
          std::fflush(nullptr);
          std::_Exit(exit_status_);
        }
        handler.shutdown(true);
        finish(kExitSuccess, "workers succeeded");
        return RoundEnd::kFinished;
      }
      case LoopAction::kReportFailure: {
        std::vector<WorkerFailure> failures = local_failures(group);
        for (const auto& failure : failures)
          events_.record("failure", failure_fields(failure));
        std::vector<int> late_signals = group.stop(SIGTERM, shutdown_timeout);
        const bool restart = handler.report_failure(failures);
        if (!late_signals.empty()) {
          finish_with_signal(&handler, nullptr, late_signals.front());
          return RoundEnd::kFinished;
        }
        if (restart) {
          events_.record("restart", {{"round", round.round}, {"reason", "local worker failure"}});
          return RoundEnd::kNextRound;
        }
        fail_job(handler);
        return RoundEnd::kFinished;
      }
      case LoopAction::kReformRound: {
        const bool membership = round_signal == RoundSignal::kMembershipChange;
        // A signal that arrives while the workers stop still ends the agent.
        if (auto late = group.stop(SIGTERM, shutdown_timeout); !late.empty()) {
          finish_with_signal(&handler, nullptr, late.front());
          return RoundEnd::kFinished;
        }
        events_.record(
            membership ? "membership_change" : "restart",
            {{"round", round.round},
             {"reason", membership ? "nodes joined or left" : "failure on another node"}});
        return RoundEnd::kNextRound;
      }
      case LoopAction::kFailJob:
        if (auto late = group.stop(SIGTERM, shutdown_timeout); !late.empty()) {
          finish_with_signal(&handler, nullptr, late.front());
          return RoundEnd::kFinished;
        }
        fail_job(handler);
        return RoundEnd::kFinished;
    }
    auto wakeup = group.wait(handler.wakeup_fd(), std::nullopt);
    if (!wakeup.signals.empty()) {
      finish_with_signal(&handler, &group, wakeup.signals.front());
      return RoundEnd::kFinished;
    }
    round_signal = wakeup.external_ready ? handler.poll() : RoundSignal::kNone;
  }
}

int AgentRun::run() {
  try {
    std::unique_ptr<RendezvousHandler> handler = make_rendezvous_handler(config_);
    for (;;) {
      auto formed = call_interruptibly<RoundInfo>(signals_, [&] { return handler->next_round(); });
      if (auto* sig = std::get_if<int>(&formed))
        exit_during_rendezvous(*sig);
      const RoundInfo& round = std::get<RoundInfo>(formed);
      events_.record("round_formed", round_fields(round));
      if (run_round(*handler, round) == RoundEnd::kFinished)
        return exit_status_;
    }
  } catch (const RendezvousError& error) {
    std::fprintf(stderr, "ddprun: rendezvous failed: %s\n", error.what());
    return finish(kExitFailure, std::string("rendezvous error: ") + error.what());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());
    return finish(kExitFailure, error.what());
  }
}

}  // namespace

int run_agent(const launcher::LaunchConfig& config) {
  // Writes to a closed console or tee pipe must fail with EPIPE, not kill the agent.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    // Before the handler exists: its threads inherit the blocked mask, so every signal is
    // delivered through the channel.
    SignalChannel signals(signals_to_forward(config));
    EventLog events(config.events_file, this_host(config));
    AgentRun run(config, signals, events);
    return run.run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());
    return kExitFailure;
  }
}

}  // namespace ddprun::agent
