#pragma once
// Loss detection of one peer from its heartbeat counter, with time as a value.

#include <cstdint>
#include <optional>
#include <string>

namespace ddprun::rendezvous::round {

// Watches one peer's heartbeat counter. Only this node's monotonic clock is used: the peer is
// lost when its counter has not changed for loss_threshold_s() of our time.
class HeartbeatMonitor {
 public:
  HeartbeatMonitor(double keep_alive_interval_s, int keep_alive_max_attempt, double now_s);

  // Returns true once the peer counts as lost (and keeps returning true).
  bool observe(int64_t counter, double now_s);
  // The store itself stalled (our probe waited long for its answer): nobody could beat
  // meanwhile, so the silence so far is not the peer's. Counting restarts at now_s.
  void forgive(double now_s);

  // How often the counter should be read. With it, a peer that stops at time t is declared lost
  // by t + keep_alive_interval x keep_alive_max_attempt (for max_attempt >= 2), and a healthy
  // peer that beats every keep_alive_interval never is.
  double check_period_s() const { return check_period_s_; }
  double loss_threshold_s() const { return loss_threshold_s_; }
  // The state that decides future answers, as text (for the model checker).
  std::string digest() const;

 private:
  double check_period_s_;
  double loss_threshold_s_;
  std::optional<int64_t> last_counter_;
  double last_change_s_;
  bool lost_ = false;
};

}  // namespace ddprun::rendezvous::round
