#pragma once
// /metrics on the health port: the agent's state in Prometheus' text exposition format
// (version 0.0.4), for the cluster's monitoring to scrape. Pure. Names follow Prometheus'
// conventions: the ddprun_ prefix, base units (seconds), _total on counters, a summary's _sum
// and _count; one series per worker state (1 for the state it is in, 0 for the others).

#include <cstdint>
#include <optional>
#include <string>

#include "agent/health/health_board.hpp"

namespace ddprun::agent {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// Every worker state a worker_state series names.
inline constexpr const char* kWorkerStates[] = {"running", "stopping", "succeeded",
                                                "failed",  "stopped",  "abandoned"};

// last_snapshot_age_s: since the bundled trainer's last snapshot, when its rank 0 runs here.
std::string prometheus_text(const HealthState& state, bool alive, int64_t last_progress_unix_s,
                            std::optional<double> last_snapshot_age_s = std::nullopt);

// A label value as the format quotes it: backslash, double quote and line feed escaped.
std::string prometheus_label_value(const std::string& value);

}  // namespace ddprun::agent
