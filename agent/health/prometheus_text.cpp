#include "agent/health/prometheus_text.hpp"

#include <cstdio>

namespace ddprun::agent {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

class Exposition {
 public:
  // The HELP and TYPE lines of one metric family.
  void family(const char* name, const char* type, const char* help) {
    text_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    text_.append(name);
    if (!labels.empty()) {
      text_.append("{").append(labels).append("}");
    }
    text_.append(" ").append(number(value)).append("\n");
  }
  void summary(const char* name, const char* help, const DurationTally& tally) {
    family(name, "summary", help);
    sample(std::string(name) + "_sum", "", tally.sum_s);
    sample(std::string(name) + "_count", "", static_cast<double>(tally.count));
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

std::string label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + prometheus_label_value(value) + "\"";
}

std::string worker_labels(int local_rank, const WorkerHealth& worker) {
  return label("local_rank", std::to_string(local_rank)) + "," +
         label("rank", std::to_string(worker.global_rank));
}

void agent_families(Exposition& out, const HealthState& state, bool alive,
                    int64_t last_progress_unix_s) {
  out.family("ddprun_up", "gauge",
             "1 while the agent's event loop makes progress within the health timeout, else 0.");
  out.sample("ddprun_up", "", alive ? 1 : 0);
  out.family("ddprun_last_progress_timestamp_seconds", "gauge",
             "When the agent's event loop last made progress (Unix time).");
  out.sample("ddprun_last_progress_timestamp_seconds", "",
             static_cast<double>(last_progress_unix_s));
  if (state.round) {
    out.family("ddprun_round", "gauge", "The rendezvous round of this node's workers.");
    out.sample("ddprun_round", "", static_cast<double>(*state.round));
  }
  out.family("ddprun_rounds_total", "counter", "Worker groups this agent started.");
  out.sample("ddprun_rounds_total", "", static_cast<double>(state.rounds_started));
  out.family("ddprun_restarts_total", "counter",
             "The job's restarts so far (TORCHELASTIC_RESTART_COUNT of the workers).");
  out.sample("ddprun_restarts_total", "", state.restarts);
  out.family("ddprun_max_restarts", "gauge", "The restarts the job may use (--max-restarts).");
  out.sample("ddprun_max_restarts", "", state.max_restarts);
  out.summary("ddprun_rendezvous_duration_seconds",
              "From the agent's start, or its last workers gone, to the next workers started.",
              state.rendezvous);
  out.summary("ddprun_restart_duration_seconds",
              "From a failure or stop the agent noticed to the next workers started.",
              state.restart);
}

void worker_families(Exposition& out, const HealthState& state) {
  out.family("ddprun_worker_state", "gauge",
             "1 for the state each of this node's workers is in, 0 for the others.");
  for (const auto& [local_rank, worker] : state.workers) {
    for (const char* name : kWorkerStates) {
      out.sample("ddprun_worker_state",
                 worker_labels(local_rank, worker) + "," + label("state", name),
                 worker.state == name ? 1 : 0);
    }
  }
  out.family("ddprun_step_interval_seconds", "gauge",
             "Median time between a worker's progress heartbeats over the straggler window.");
  for (const auto& [local_rank, worker] : state.workers) {
    if (worker.step_interval_s) {
      out.sample("ddprun_step_interval_seconds", worker_labels(local_rank, worker),
                 *worker.step_interval_s);
    }
  }
  out.family("ddprun_stragglers", "gauge",
             "Ranks reported slower than the job's median by the straggler factor, now.");
  out.sample("ddprun_stragglers", "", static_cast<double>(state.stragglers.size()));
  out.family("ddprun_straggler", "gauge", "1 for each rank reported as a straggler now.");
  for (const int rank : state.stragglers) {
    out.sample("ddprun_straggler", label("rank", std::to_string(rank)), 1);
  }
}

}  // namespace

std::string prometheus_label_value(const std::string& value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string prometheus_text(const HealthState& state, bool alive, int64_t last_progress_unix_s,
                            std::optional<double> last_snapshot_age_s) {
  Exposition out;
  agent_families(out, state, alive, last_progress_unix_s);
  worker_families(out, state);
  if (last_snapshot_age_s) {
    out.family("ddprun_last_snapshot_age_seconds", "gauge",
               "Since the bundled trainer last wrote a snapshot (on the node of its rank 0).");
    out.sample("ddprun_last_snapshot_age_seconds", "", *last_snapshot_age_s);
  }
  return out.take();
}

}  // namespace ddprun::agent
