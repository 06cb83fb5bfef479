// The progress watchdog (--watchdog-timeout) as a pure state machine: heartbeats and the time
// as values, no clock, no sleeps.
#include <catch2/catch.hpp>

#include "agent/watchdog/progress/progress_watch.hpp"

using namespace ddprun::agent;
using namespace std::chrono_literals;

namespace {

using TimePoint = ProgressWatch::TimePoint;
const TimePoint kStart = TimePoint(1000s);

std::vector<WatchedWorker> three_workers() {
  return {WatchedWorker{0, 6, 100}, WatchedWorker{1, 7, 101}, WatchedWorker{2, 8, 102}};
}

std::vector<int> ranks(const std::vector<HungWorker>& hung) {
  std::vector<int> out;
  for (const HungWorker& h : hung)
    out.push_back(h.worker.global_rank);
  return out;
}

}  // namespace

TEST_CASE("progress watch: a worker that never beats is never hung (opt-in)") {
  ProgressWatch watch(10s);
  watch.start_group(three_workers());
  CHECK(watch.next_deadline() == std::nullopt);
  CHECK(watch.take_hung(kStart + 24h).empty());
  CHECK_FALSE(watch.armed(0));
}

TEST_CASE("progress watch: armed by the first beat, hung after a whole timeout of silence") {
  ProgressWatch watch(10s);
  watch.start_group(three_workers());
  watch.on_heartbeat(1, kStart);
  CHECK(watch.armed(1));
  CHECK(watch.next_deadline() == kStart + 10s);
  CHECK(watch.take_hung(kStart + 10s - 1ns).empty());
  std::vector<HungWorker> hung = watch.take_hung(kStart + 10s);
  REQUIRE(hung.size() == 1);
  CHECK(hung[0].worker.local_rank == 1);
  CHECK(hung[0].worker.global_rank == 7);
  CHECK(hung[0].worker.pid == 101);
  CHECK(hung[0].silent_for == 10s);
  // Reported once; no deadline left to arm for it.
  CHECK(watch.take_hung(kStart + 1h).empty());
  CHECK(watch.next_deadline() == std::nullopt);
}

TEST_CASE("progress watch: every beat pushes the deadline; a beat after a report re-arms") {
  ProgressWatch watch(5s);
  watch.start_group(three_workers());
  for (int i = 0; i < 100; ++i) {
    watch.on_heartbeat(0, kStart + i * 4s);
    CHECK(watch.take_hung(kStart + i * 4s + 4s).empty());
  }
  CHECK(watch.next_deadline() == kStart + 99 * 4s + 5s);
  REQUIRE(watch.take_hung(kStart + 99 * 4s + 5s).size() == 1);
  watch.on_heartbeat(0, kStart + 1000s);
  CHECK(watch.next_deadline() == kStart + 1005s);
  CHECK(watch.take_hung(kStart + 1004s).empty());
  CHECK(watch.take_hung(kStart + 1005s).size() == 1);
}

TEST_CASE("progress watch: a beat with an older time never moves the deadline back") {
  ProgressWatch watch(5s);
  watch.start_group(three_workers());
  watch.on_heartbeat(0, kStart + 10s);
  watch.on_heartbeat(0, kStart + 2s);
  CHECK(watch.next_deadline() == kStart + 15s);
  CHECK(watch.take_hung(kStart + 14s).empty());
}

TEST_CASE("progress watch: several workers, the earliest deadline, reports in rank order") {
  ProgressWatch watch(10s);
  watch.start_group(three_workers());
  watch.on_heartbeat(2, kStart);
  watch.on_heartbeat(0, kStart + 3s);
  watch.on_heartbeat(1, kStart + 6s);
  CHECK(watch.next_deadline() == kStart + 10s);
  CHECK(ranks(watch.take_hung(kStart + 10s)) == std::vector<int>{8});
  CHECK(watch.next_deadline() == kStart + 13s);
  CHECK(ranks(watch.take_hung(kStart + 30s)) == std::vector<int>{6, 7});
  CHECK(watch.next_deadline() == std::nullopt);
}

TEST_CASE("progress watch: exited workers and unknown ranks") {
  ProgressWatch watch(10s);
  watch.start_group(three_workers());
  watch.on_heartbeat(0, kStart);
  watch.on_heartbeat(7, kStart);  // not a local rank of this group: ignored
  watch.forget_worker(0);
  CHECK_FALSE(watch.armed(0));
  CHECK(watch.next_deadline() == std::nullopt);
  CHECK(watch.take_hung(kStart + 1h).empty());
  watch.on_heartbeat(0, kStart + 1s);  // a late beat of a forgotten worker changes nothing
  CHECK(watch.take_hung(kStart + 1h).empty());
}

TEST_CASE("progress watch: a new worker group starts unarmed") {
  ProgressWatch watch(10s);
  watch.start_group(three_workers());
  watch.on_heartbeat(1, kStart);
  watch.start_group(three_workers());
  CHECK_FALSE(watch.armed(1));
  CHECK(watch.take_hung(kStart + 1h).empty());
}

TEST_CASE("progress watch refuses a non-positive timeout") {
  CHECK_THROWS_AS(ProgressWatch(0s), std::invalid_argument);
  CHECK_THROWS_AS(ProgressWatch(-1s), std::invalid_argument);
  CHECK(ProgressWatch(1ms).timeout() == 1ms);
}
