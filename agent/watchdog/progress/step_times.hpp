#pragma once
// Each rank's step interval, from its progress heartbeats (--watchdog-timeout; one beat per
// step, as `train` and the README's one-liner write them): the time between beats, kept over a
// sliding window. Pure: the beats and the time go in as values. Not thread-safe: one event
// loop. Straggler detection compares these job-wide (straggler_report.hpp).

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "agent/base/watched_worker.hpp"

namespace ddprun::agent {

// A rank's median needs this many intervals in the window (a single slow step is not a
// straggler).
inline constexpr std::size_t kMinStepSamples = 3;
// Intervals kept per rank at most (a rank beating thousands of times per window gains nothing).
inline constexpr std::size_t kMaxStepSamples = 4096;

class StepTimes {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  explicit StepTimes(std::chrono::milliseconds window) : window_(window) {}

  // A new worker group: no intervals yet.
  void start_group(const std::vector<WatchedWorker>& workers);
  // beats heartbeats of this local rank arrived together at now (unknown ranks are ignored):
  // each counts as an interval of (now - previous beat) / beats.
  void on_beats(int local_rank, std::size_t beats, TimePoint now);
  void forget_worker(int local_rank);

  // The median step interval in seconds of each global rank with kMinStepSamples intervals
  // that ended within the window before now.
  std::map<int, double> medians(TimePoint now);
  // For a chart: the window cut into `buckets` equal spans, oldest first, each the median
  // interval that ended in it (nothing where none did), by global rank.
  std::map<int, std::vector<std::optional<double>>> series(TimePoint now, std::size_t buckets);

 private:
  struct Rank {
    WatchedWorker worker;
    std::optional<TimePoint> last_beat;
    std::deque<std::pair<TimePoint, double>> intervals;  // (end, seconds), oldest first
  };
  std::chrono::milliseconds window_;
  std::vector<Rank> ranks_;
};

}  // namespace ddprun::agent
