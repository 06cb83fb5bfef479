#pragma once
// Straggler detection in the agent's event loop (--straggler-factor, with --watchdog-timeout's
// heartbeats): every window, this node publishes its ranks' median step intervals (StepTimes)
// under the round's steps/<group rank> key; the round's node 0 then reads every node's record
// and reports each rank slower than the job's median by the factor (straggler_report.hpp): one
// console line naming rank and host, and a "straggler" event. Nobody is signalled. A rank is
// reported once per round, and again after it recovered and slowed down anew.
//
// It shares the round's KvBackend with the round driver (op ids from kStragglerWatchOpIds). A
// store error skips one window quietly: the round machine sees the same store and reports it;
// a corrupt record is reported with its key and left out.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/base/event_log.hpp"
#include "agent/watchdog/progress/step_times.hpp"
#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/backends/kv_side_client.hpp"
#include "rendezvous/round/round_info.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

struct StragglerConfig {
  double factor = 0;  // 0: off
  std::chrono::milliseconds window{60'000};
};

class StragglerWatch {
 public:
  StragglerWatch(boost::asio::io_context& io, rendezvous::backends::KvBackend& backend,
                 StragglerConfig config, std::string host, EventLog& events,
                 std::function<void()> before_print);
  // Destruction cancels its pending ops: their completions never run.
  StragglerWatch(const StragglerWatch&) = delete;
  StragglerWatch& operator=(const StragglerWatch&) = delete;

  void round_started(const rendezvous::round::RoundInfo& round,
                     const std::vector<WatchedWorker>& workers);
  void round_ended();
  // From the heartbeat driver: beats of this local rank arrived now.
  void on_beats(int local_rank, std::size_t beats);
  void forget_worker(int local_rank) { steps_.forget_worker(local_rank); }

  // This node's ranks' median step intervals over the window, by global rank (StepTimes).
  std::map<int, double> step_intervals() { return steps_.medians(StepTimes::Clock::now()); }
  // The same over time, for the job page's charts (StepTimes::series).
  std::map<int, std::vector<std::optional<double>>> step_series(std::size_t buckets) {
    return steps_.series(StepTimes::Clock::now(), buckets);
  }
  // The ranks reported as stragglers in this round now (only the round's node 0 compares).
  const std::set<int>& stragglers() const { return reported_; }

 private:
  void arm();
  void publish();
  void compare();

  rendezvous::backends::KvSideClient kv_;
  StragglerConfig config_;
  std::string host_;
  EventLog& events_;
  std::function<void()> before_print_;
  StepTimes steps_;
  boost::asio::steady_timer timer_;

  std::optional<rendezvous::round::RoundInfo> round_;
  std::set<int> reported_;  // stragglers of this round now
  uint64_t generation_ = 0;
};

}  // namespace ddprun::agent
