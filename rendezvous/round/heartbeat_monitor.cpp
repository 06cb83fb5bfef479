#include "rendezvous/round/heartbeat_monitor.hpp"

#include <algorithm>

namespace ddprun::rendezvous::round {

HeartbeatMonitor::HeartbeatMonitor(common::Seconds keep_alive_interval, int keep_alive_max_attempt,
                                   MachineTime now)
    : check_period_(keep_alive_interval / 4),
      // Detection happens at most two check periods after the threshold, so the threshold is
      // the budget minus half an interval; it never drops below one beat gap plus two checks,
      // or healthy peers would be declared lost.
      loss_threshold_(
          std::max(keep_alive_interval * keep_alive_max_attempt - keep_alive_interval / 2,
                   keep_alive_interval + 2 * (keep_alive_interval / 4))),
      last_change_(now) {}

bool HeartbeatMonitor::observe(int64_t counter, MachineTime now) {
  if (lost_) {
    return true;
  }
  if (!last_counter_ || *last_counter_ != counter) {
    last_counter_ = counter;
    last_change_ = now;
    return false;
  }
  lost_ = now - last_change_ >= loss_threshold_;
  return lost_;
}

void HeartbeatMonitor::forgive(MachineTime now) {
  if (!lost_) {
    last_change_ = now;
  }
}

std::string HeartbeatMonitor::digest() const {
  return std::to_string(last_counter_.value_or(-1)) + "@" +
         std::to_string(last_change_.time_since_epoch().count()) + (lost_ ? "!" : "");
}

}  // namespace ddprun::rendezvous::round
