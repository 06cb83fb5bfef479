#pragma once
// Live recovery's channel from the workers to their agent (--recovery live): a worker whose
// collective broke writes "<control>.broken.<LOCAL_RANK>" beside its control file
// (agent/workers/live_control.hpp) before it waits for the next world. The agent hears of it
// through inotify on that folder, at once and without polling, and the round re-forms without
// waiting for the heartbeats to notice the lost node (round::CollectiveBroke).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

class LiveReports {
 public:
  // on_broken(generation): the round in which a worker's collectives broke, as it wrote it
  // (a report of an earlier round comes late and must be ignored).
  LiveReports(boost::asio::io_context& io, std::function<void(uint64_t)> on_broken);
  LiveReports(const LiveReports&) = delete;
  LiveReports& operator=(const LiveReports&) = delete;

  // Watches the folder of this control file (instead of any earlier one). Without inotify it
  // stays silent: the heartbeats still notice a lost node, later.
  void watch(const std::string& control_path);

 private:
  void arm();
  void on_readable();

  std::function<void(uint64_t)> on_broken_;
  std::string folder_;
  std::optional<boost::asio::posix::stream_descriptor> inotify_;
  int watch_descriptor_ = -1;
  std::string report_prefix_;  // "<control file name>.broken."
};

}  // namespace ddprun::agent
