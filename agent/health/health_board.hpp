#pragma once
// What the agent's loop tells its health-check server (health_server.hpp), across threads. The
// loop records progress on every turn it reports and publishes the round's state when it
// changes; the server reads both from its own thread. The server must answer while the loop is
// stalled, even one stopped while publishing, so progress is atomic and the state is read with
// try_lock: a busy lock leaves the server with the last state it read.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ddprun::agent {

// How many times something took how long (a Prometheus summary without quantiles).
struct DurationTally {
  uint64_t count = 0;
  double sum_s = 0;
  double last_s = 0;
};

struct WorkerHealth {
  std::string state;  // running, stopping, succeeded, failed, stopped, abandoned
  int global_rank = 0;
  int pid = 0;
  // The median time between its progress heartbeats over the straggler window, when known
  // (--watchdog-timeout, with straggler detection on).
  std::optional<double> step_interval_s;
  uint64_t steps = 0;  // progress heartbeats since the group started (--watchdog-timeout)
  // The step interval over the straggler window, oldest first (kStepSeriesPoints spans; nothing
  // where no step ended); only while the job page is looked at.
  std::vector<std::optional<double>> step_series;
};
inline constexpr std::size_t kStepSeriesPoints = 30;

// What the job page says of the job and this node, fixed for the agent's life.
struct JobFacts {
  std::string run_id;
  std::string backend;  // c10d, static, etcd
  std::string host;     // this node's name
  int min_nodes = 1;
  int max_nodes = 1;
  int nproc_per_node = 1;
};

// The round as the health port shows it (health JSON, /metrics and the job page).
struct HealthState {
  JobFacts job;
  std::optional<uint64_t> round;  // nothing before the first round forms
  int group_rank = 0;             // of the round, when there is one
  int group_world_size = 0;
  int world_size = 0;
  int restarts = 0;             // TORCHELASTIC_RESTART_COUNT of the running group
  int max_restarts = 0;         // --max-restarts
  uint64_t rounds_started = 0;  // worker groups this agent started
  DurationTally rendezvous;     // workers gone (or the agent's start) -> next workers started
  DurationTally restart;        // first failure or stop noticed -> next workers started
  std::map<int, WorkerHealth> workers;  // by local rank
  std::set<int> stragglers;  // global ranks reported slow in this round (the round's node 0)
  // Where the job page is served when not here: the round's node 0 ("host:port"), "" when
  // this agent serves it (node 0, no round yet, or node 0 did not say).
  std::string page_location;
  // Where the bundled trainer's rank 0 copies its metrics lines (trainer_progress.hpp), when it
  // runs here; "" otherwise.
  std::string trainer_metrics_path;
  // --health-check: "passed", or "failed: <reason>", of the last node check; "" without checks.
  std::string node_check;
};

// Stacks asked for from the job page (page_stacks.hpp): where the last request stands.
struct PageStacksState {
  enum class Phase { kNone, kCapturing, kDone, kFailed };
  Phase phase = Phase::kNone;
  uint64_t request = 0;
  std::string problem;               // kFailed: why
  std::vector<std::string> answers;  // kDone: each node's StacksAnswer JSON as read, "" if none
};

// A node of the round as the job page's agent last read its record (job_view_exchange.hpp).
struct PeerRecord {
  int group_rank = 0;
  std::string record;  // the JSON as read; "" when there was none
};

class HealthBoard {
 public:
  using Clock = std::chrono::steady_clock;

  // The loop's side.
  void record_progress();
  void publish(HealthState state);  // records progress too

  // The agent's recent events (EventLog lines), the last kRecentEvents of them.
  static constexpr std::size_t kRecentEvents = 100;
  void add_event(std::string line);

  // The job page's exchange: the other nodes' records as last read.
  void publish_peers(std::vector<PeerRecord> peers);
  // Whether the job page's API was asked for within `lease` before now (the server notes it; the
  // loop asks for peers' records only while someone looks). Never asked: false.
  bool viewed_within(Clock::duration lease, Clock::time_point now) const;

  // Stacks from the job page: the server asks, the loop takes the request and reports.
  void ask_for_stacks() { stacks_asked_.store(true, std::memory_order_relaxed); }
  bool take_stacks_request() { return stacks_asked_.exchange(false, std::memory_order_relaxed); }
  void publish_stacks(PageStacksState state);
  PageStacksState stacks_or(const PageStacksState& fallback) const;

  // The server's side.
  void note_viewed();
  std::vector<PeerRecord> peers_or(const std::vector<PeerRecord>& fallback) const;
  Clock::time_point last_progress() const;
  int64_t last_progress_unix_s() const;
  // The latest state, or `fallback` when the loop holds the lock right now.
  HealthState state_or(const HealthState& fallback) const;
  // The recent events, oldest first, or `fallback` when the loop holds the lock right now.
  std::deque<std::string> events_or(const std::deque<std::string>& fallback) const;

 private:
  std::atomic<Clock::rep> progress_ticks_{Clock::now().time_since_epoch().count()};
  std::atomic<int64_t> progress_unix_s_{0};
  mutable std::mutex mutex_;
  HealthState state_;
  mutable std::mutex events_mutex_;
  std::deque<std::string> events_;
  std::atomic<Clock::rep> viewed_ticks_{Clock::time_point::min().time_since_epoch().count()};
  mutable std::mutex peers_mutex_;
  std::vector<PeerRecord> peers_;
  std::atomic<bool> stacks_asked_{false};
  mutable std::mutex stacks_mutex_;
  PageStacksState stacks_;
};

}  // namespace ddprun::agent
