#include "agent/rdzv_round_watcher.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "agent/rdzv_state_machine.hpp"

namespace ddprun::agent::rdzv {
namespace {

// The value of interrupt keys (the exit barrier tells it from a completed barrier).
constexpr char kInterrupted[] = "interrupted";

// Bounds every blocking wait so stop() never waits longer than this for the thread.
constexpr double kMaxWaitS = 1.0;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(seconds * 1000)));
}

}  // namespace

RoundWatcher::RoundWatcher(WatchPlan plan, rendezvous::store::StoreClient& client, const EventFd& wakeup)
    : plan_(std::move(plan)), client_(client), wakeup_(wakeup), thread_([this] { run(); }) {}

RoundWatcher::~RoundWatcher() {
  stop();
}

void RoundWatcher::stop() {
  stopping_.store(true);
  if (thread_.joinable()) {
    thread_.join();
  }
}

void RoundWatcher::run() {
  rendezvous::store::StoreClient* client = &client_;
  auto lose_store = [&](const rendezvous::store::StoreError& error) {
    if (!stopping_.load()) {
      std::fprintf(stderr, "ddprun: lost the rendezvous store: %s\n", error.what());
      store_lost_.store(true);
      woken_.store(true);
      wakeup_.signal();
    }
  };
  const double interval = plan_.keep_alive_interval_s;
  std::optional<HeartbeatMonitor> monitor;
  if (!plan_.neighbor_heartbeat_key.empty()) {
    monitor.emplace(interval, plan_.keep_alive_max_attempt, now_s());
  }
  double next_beat = now_s();
  double next_check = monitor ? now_s() + monitor->check_period_s() : 0;
  bool declared_loss = false;
  double last_answer = now_s();
  bool slowness_reported = false;
  while (!stopping_.load()) {
    try {
      double now = now_s();
      if (!plan_.own_heartbeat_key.empty() && now >= next_beat) {
        client->add(plan_.own_heartbeat_key, 1);
        next_beat = now + interval;
      }
      if (monitor && !declared_loss && now >= next_check) {
        const int64_t counter = client->add(plan_.neighbor_heartbeat_key, 0);
        if (monitor->observe(counter, now_s())) {
          // Count first, then wake: whoever wakes reads the counter.
          declared_loss = true;
          client->add(plan_.lost_counter_key, 1);
          // The lost node will never leave by itself: count it, so the store's host does not
          // wait for it at the end.
          if (client->add(plan_.left_counter_key, 1) >= plan_.participants) {
            client->set(plan_.all_left_key, "1");
          }
          const std::vector<std::string> values(plan_.interrupt_keys.size(), kInterrupted);
          client->multi_set(plan_.interrupt_keys, values);
        }
        next_check = now_s() + monitor->check_period_s();
      }
      double until = now_s() + kMaxWaitS;
      if (!plan_.own_heartbeat_key.empty()) {
        until = std::min(until, next_beat);
      }
      if (monitor && !declared_loss) {
        until = std::min(until, next_check);
      }
      const bool woken = client->wait({plan_.wake_key}, to_ms(until - now_s()));
      last_answer = now_s();
      slowness_reported = false;
      if (woken) {
        if (!stopping_.load()) {
          woken_.store(true);
          wakeup_.signal();
        }
        return;
      }
    } catch (const rendezvous::store::StoreUnresponsive& error) {
      if (now_s() - last_answer > plan_.unresponsive_limit_s) {
        lose_store(error);
        return;
      }
      if (!slowness_reported && !stopping_.load()) {
        std::fprintf(stderr,
                     "ddprun: warning: the rendezvous store is slow to answer (%s); retrying\n",
                     error.what());
        slowness_reported = true;
      }
    } catch (const rendezvous::store::StoreError& error) {
      lose_store(error);
      return;
    }
  }
}

}  // namespace ddprun::agent::rdzv
