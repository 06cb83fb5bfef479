#pragma once
// What one node tells the job page's agent about itself (job_view_exchange.hpp), as the JSON
// record it stores under the round's job_view_node key, and back. The record comes from the
// store, which anyone on the network can write to: reading it back validates every field and
// bounds every length and count, and a record that fails is named, never shown as data. Pure.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/health/health_board.hpp"

namespace ddprun::agent {

inline constexpr std::size_t kMaxNodeRecordBytes = 256 * 1024;
inline constexpr std::size_t kMaxNodeRecordRanks = 1024;
inline constexpr std::size_t kMaxNodeRecordText = 256;  // host, state

struct RankView {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  std::string state;
  std::optional<double> step_interval_s;
  uint64_t steps = 0;  // progress heartbeats since its group started
  bool straggler = false;
  std::vector<std::optional<double>> step_series;  // at most kMaxStepSeriesPoints
};
inline constexpr std::size_t kMaxStepSeriesPoints = 120;

struct NodeRecord {
  std::string host;
  int group_rank = 0;
  bool alive = true;
  int64_t last_progress_unix = 0;
  int restarts = 0;
  std::string node_check;  // the last node check's result, "" without --health-check
  std::vector<RankView> ranks;
};

// This node's record, from what its loop published.
NodeRecord node_record_of(const HealthState& state, bool alive, int64_t last_progress_unix);

nlohmann::json node_record_json(const NodeRecord& record);
std::string node_record_to_json(const NodeRecord& record);
// Throws std::invalid_argument naming the field at fault.
NodeRecord node_record_from_json(const std::string& text);

}  // namespace ddprun::agent
