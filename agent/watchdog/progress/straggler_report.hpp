#pragma once
// Stragglers, job-wide: each node publishes its ranks' median step intervals (StepTimes) as a
// record in the round's store; the round's node 0 reads every node's record and names the
// ranks slower than the job's median by the configured factor. Records come from the store,
// which anyone on the network can write to: reading one back validates and bounds it. Pure.

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ddprun::agent {

inline constexpr std::size_t kMaxStepRecordBytes = 256 * 1024;
inline constexpr std::size_t kMaxStepRecordRanks = 4096;
inline constexpr std::size_t kMaxStepRecordHost = 256;

struct NodeStepTimes {
  std::string host;
  std::map<int, double> median_step_s;  // global rank -> seconds
};

std::string node_step_times_to_json(const NodeStepTimes& node);
// Throws std::invalid_argument naming the field at fault.
NodeStepTimes node_step_times_from_json(const std::string& text);

struct Straggler {
  int rank = 0;
  std::string host;
  double step_s = 0;
  double job_median_s = 0;
};

// Ranks whose median step is at least factor x the job's median (the lower middle of every
// rank's median, so one slow rank of two is still measured against the other). Needs two
// ranks or more; rank order.
std::vector<Straggler> find_stragglers(const std::vector<NodeStepTimes>& nodes, double factor);

// "straggler: rank 3 on node-b steps every 0.412 s, 4.1x the job's median 0.100 s (last 60 s)"
std::string describe_straggler(const Straggler& straggler, std::chrono::milliseconds window);

}  // namespace ddprun::agent
