#include "rendezvous/round/heartbeat_monitor.hpp"

#include <algorithm>

namespace ddprun::rendezvous::round {

HeartbeatMonitor::HeartbeatMonitor(double keep_alive_interval_s, int keep_alive_max_attempt,
                                   double now_s)
    : check_period_s_(keep_alive_interval_s / 4),
      // Detection happens at most two check periods after the threshold, so the threshold is
      // the budget minus half an interval; it never drops below one beat gap plus two checks,
      // or healthy peers would be declared lost.
      loss_threshold_s_(
          std::max(keep_alive_interval_s * keep_alive_max_attempt - keep_alive_interval_s / 2,
                   keep_alive_interval_s + 2 * (keep_alive_interval_s / 4))),
      last_change_s_(now_s) {}

bool HeartbeatMonitor::observe(int64_t counter, double now_s) {
  if (lost_) {
    return true;
  }
  if (!last_counter_ || *last_counter_ != counter) {
    last_counter_ = counter;
    last_change_s_ = now_s;
    return false;
  }
  lost_ = now_s - last_change_s_ >= loss_threshold_s_;
  return lost_;
}

void HeartbeatMonitor::forgive(double now_s) {
  if (!lost_) {
    last_change_s_ = now_s;
  }
}

std::string HeartbeatMonitor::digest() const {
  return std::to_string(last_counter_.value_or(-1)) + "@" + std::to_string(last_change_s_) +
         (lost_ ? "!" : "");
}

}  // namespace ddprun::rendezvous::round
