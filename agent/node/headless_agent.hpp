#pragma once
// An agent without worker processes: the real rendezvous set-up, machine, driver and backend,
// with "workers" that are only a state the caller moves (succeed, fail) and that stop at once.
// Many of them share one io_context: the rendezvous tests run several nodes in one process, and
// the scale simulator (bench/rendezvous) runs thousands against one ddprun-store.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/agent_config.hpp"
#include "agent/base/round_types.hpp"
#include "agent/node/node_rendezvous.hpp"
#include "rendezvous/backends/round_driver.hpp"

namespace ddprun::agent {

class HeadlessAgent final : public rendezvous::backends::RoundListener {
 public:
  // Called after every event the agent saw (a round started, workers stopped, finished, ...).
  using Observer = std::function<void(HeadlessAgent&)>;

  // Throws what NodeRendezvous throws (RendezvousError for bad configuration).
  HeadlessAgent(boost::asio::io_context& io, const RendezvousConfig& config,
                Observer observer = {});
  ~HeadlessAgent() override;

  void begin();
  // The workers of the running round exit 0 / fail.
  void succeed();
  void fail(int exit_code = 1);
  void signal(int signal_number);
  // Dies like a SIGKILLed agent: no leaving, its connections just close.
  void crash();

  bool running() const { return running_.has_value(); }
  const std::optional<RoundInfo>& round() const { return running_; }
  const std::vector<RoundInfo>& rounds() const { return rounds_; }
  const std::optional<rendezvous::round::Finish>& finish() const { return finish_; }
  const std::vector<rendezvous::round::Notice>& notices() const { return notices_; }
  bool hosts_store() const { return rendezvous_ && rendezvous_->hosts_rendezvous_store(); }
  const std::string& name() const { return name_; }

  // RoundListener.
  void host_workers_store(uint64_t round) override;
  void start_workers(const RoundInfo& round) override;
  void stop_workers(const rendezvous::round::StopWorkers& stop) override;
  void notice(const rendezvous::round::Notice& notice) override;
  void finished(const rendezvous::round::Finish& finish) override;

 private:
  void observe();

  std::string name_;
  Observer observer_;
  std::unique_ptr<NodeRendezvous> rendezvous_;  // null once crashed
  std::optional<RoundInfo> running_;
  std::vector<RoundInfo> rounds_;
  std::optional<rendezvous::round::Finish> finish_;
  std::vector<rendezvous::round::Notice> notices_;
};

}  // namespace ddprun::agent
