#pragma once
// The background side of a running round: beats this node's heartbeat counter, watches the
// next node's (a ring, so O(N) store traffic in total), declares it lost when it stops, and
// blocks on this node's wake key so any other node can interrupt the round at once. It uses a
// store connection of its own (clients are not thread-safe), lent for the watcher's lifetime so
// rounds do not pay for a connect.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "agent/rdzv_event_fd.hpp"
#include "rendezvous/store/store_client.hpp"

namespace ddprun::agent::rdzv {

struct WatchPlan {
  std::string wake_key;  // ours: set by whoever interrupts the round
  // Every participant's wake key and the exit-barrier release: set when we declare a loss, so
  // nobody waits for the lost node, running or in the exit barrier.
  std::vector<std::string> interrupt_keys;
  std::string own_heartbeat_key;       // empty: no heartbeats (alone in the round)
  std::string neighbor_heartbeat_key;  // empty: nobody to watch
  std::string lost_counter_key;
  std::string left_counter_key;
  std::string all_left_key;
  int participants = 1;
  double keep_alive_interval_s = 5;
  int keep_alive_max_attempt = 3;
  // A store that accepts requests but answers none for this long counts as lost. Shorter
  // silences (an overloaded store host) only cost a warning, as torchrun's failed keep-alives.
  double unresponsive_limit_s = 60;
};

class RoundWatcher {
 public:
  // `client` is used only by the watcher's thread until stop() returns.
  RoundWatcher(WatchPlan plan, rendezvous::store::StoreClient& client, const EventFd& wakeup);
  ~RoundWatcher();  // stops and joins
  RoundWatcher(const RoundWatcher&) = delete;
  RoundWatcher& operator=(const RoundWatcher&) = delete;

  // The wake key was set (or the store was lost): the run loop should poll().
  bool woken() const { return woken_.load(); }
  bool store_lost() const { return store_lost_.load(); }

  // Stops the thread. The caller sets our wake key first (with its own client) so the blocked
  // WAIT returns at once; without that the thread still ends within one check period.
  void stop();
  const std::string& wake_key() const { return plan_.wake_key; }

 private:
  void run();

  WatchPlan plan_;
  rendezvous::store::StoreClient& client_;
  const EventFd& wakeup_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> woken_{false};
  std::atomic<bool> store_lost_{false};
  std::thread thread_;
};

}  // namespace ddprun::agent::rdzv
