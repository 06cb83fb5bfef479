#pragma once
// Loss detection of one peer from its heartbeat counter, with time as a value.

#include <cstdint>
#include <optional>
#include <string>

#include "common/seconds.hpp"
#include "rendezvous/round/machine_time.hpp"

namespace ddprun::rendezvous::round {

// Watches one peer's heartbeat counter. Only this node's monotonic clock is used: the peer is
// lost when its counter has not changed for loss_threshold() of our time.
class HeartbeatMonitor {
 public:
  HeartbeatMonitor(common::Seconds keep_alive_interval, int keep_alive_max_attempt,
                   MachineTime now);

  // Returns true once the peer counts as lost (and keeps returning true).
  bool observe(int64_t counter, MachineTime now);
  // The store itself stalled (our probe waited long for its answer): nobody could beat
  // meanwhile, so the silence so far is not the peer's. Counting restarts at now.
  void forgive(MachineTime now);

  // How often the counter should be read. With it, a peer that stops at time t is declared lost
  // by t + keep_alive_interval x keep_alive_max_attempt (for max_attempt >= 2), and a healthy
  // peer that beats every keep_alive_interval never is.
  common::Seconds check_period() const { return check_period_; }
  common::Seconds loss_threshold() const { return loss_threshold_; }
  // The state that decides future answers, as text (for the model checker).
  std::string digest() const;

 private:
  common::Seconds check_period_;
  common::Seconds loss_threshold_;
  std::optional<int64_t> last_counter_;
  MachineTime last_change_;
  bool lost_ = false;
};

}  // namespace ddprun::rendezvous::round
