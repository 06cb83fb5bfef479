#include "agent/watchdog/progress/step_times.hpp"

#include <algorithm>

namespace ddprun::agent {

void StepTimes::start_group(const std::vector<WatchedWorker>& workers) {
  ranks_.clear();
  for (const WatchedWorker& worker : workers)
    ranks_.push_back(Rank{worker, std::nullopt, {}});
}

void StepTimes::on_beats(int local_rank, std::size_t beats, TimePoint now) {
  auto it = std::find_if(ranks_.begin(), ranks_.end(),
                         [&](const Rank& r) { return r.worker.local_rank == local_rank; });
  if (it == ranks_.end() || beats == 0)
    return;
  if (it->last_beat) {
    const double seconds =
        std::chrono::duration<double>(now - *it->last_beat).count() / static_cast<double>(beats);
    for (std::size_t i = 0; i < beats && i < kMaxStepSamples; ++i)
      it->intervals.emplace_back(now, seconds);
    while (it->intervals.size() > kMaxStepSamples)
      it->intervals.pop_front();
  }
  it->last_beat = now;
}

void StepTimes::forget_worker(int local_rank) {
  std::erase_if(ranks_, [&](const Rank& r) { return r.worker.local_rank == local_rank; });
}

namespace {

double median_of(std::vector<double>& seconds) {
  const auto middle = seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2);
  std::nth_element(seconds.begin(), middle, seconds.end());
  return *middle;
}

}  // namespace

std::map<int, double> StepTimes::medians(TimePoint now) {
  std::map<int, double> out;
  for (Rank& rank : ranks_) {
    while (!rank.intervals.empty() && rank.intervals.front().first + window_ < now)
      rank.intervals.pop_front();
    if (rank.intervals.size() < kMinStepSamples)
      continue;
    std::vector<double> seconds;
    seconds.reserve(rank.intervals.size());
    for (const auto& interval : rank.intervals)
      seconds.push_back(interval.second);
    out[rank.worker.global_rank] = median_of(seconds);
  }
  return out;
}

std::map<int, std::vector<std::optional<double>>> StepTimes::series(TimePoint now,
                                                                    std::size_t buckets) {
  std::map<int, std::vector<std::optional<double>>> out;
  if (buckets == 0)
    return out;
  const TimePoint start = now - window_;
  const auto span =
      std::chrono::duration_cast<Clock::duration>(window_) / static_cast<Clock::rep>(buckets);
  for (Rank& rank : ranks_) {
    std::vector<std::vector<double>> in_bucket(buckets);
    for (const auto& [end, seconds] : rank.intervals) {
      if (end < start || end > now || span.count() <= 0)
        continue;
      const auto index = static_cast<std::size_t>((end - start) / span);
      in_bucket[std::min(index, buckets - 1)].push_back(seconds);
    }
    auto& points = out[rank.worker.global_rank];
    for (auto& values : in_bucket)
      points.push_back(values.empty() ? std::nullopt : std::optional<double>(median_of(values)));
  }
  return out;
}

}  // namespace ddprun::agent
