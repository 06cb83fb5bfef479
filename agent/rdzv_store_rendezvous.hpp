#pragma once
// What the static and c10d backends share once a round is formed: the round watcher (wake-ups,
// heartbeats), failure publication and the job-wide restart counter, the exit barrier, leaving,
// and the store connection. The backends differ only in how a round forms (join()).

#include <memory>
#include <optional>
#include <string>

#include "agent/rdzv_event_fd.hpp"
#include "agent/rdzv_keys.hpp"
#include "agent/rdzv_records.hpp"
#include "agent/rdzv_round_watcher.hpp"
#include "agent/rdzv_settings.hpp"
#include "agent/rendezvous_handler.hpp"
#include "rendezvous/store/store_client.hpp"
#include "rendezvous/store/store_server.hpp"

namespace ddprun::agent::rdzv {

// Where the rendezvous store is, and the server when this agent hosts it.
struct StoreEndpoint {
  std::string host;
  uint16_t port = 0;
  std::unique_ptr<rendezvous::store::StoreServer> hosted;  // null when another agent hosts it
  std::string text() const { return host + ":" + std::to_string(port); }
};

// A formed round as this node sees it.
struct FormedRound {
  uint64_t round = 0;
  int slot = 0;
  Assignment assignment;
  std::string master_addr;
  uint16_t master_port = 0;
};

class StoreRendezvous : public RendezvousHandler {
 public:
  ~StoreRendezvous() override;

  RoundInfo next_round() final;
  int wakeup_fd() const final { return wakeup_.fd(); }
  // Throws RendezvousError when the store was lost during the round.
  RoundSignal poll() final;
  bool report_failure(const std::vector<WorkerFailure>& failures) final;
  std::vector<WorkerFailure> job_failures() final;
  void exit_barrier(std::chrono::duration<double> timeout) final;
  void shutdown(bool close_rendezvous) final;

 protected:
  StoreRendezvous(const launcher::LaunchConfig& config, RdzvSettings settings,
                  StoreEndpoint endpoint, std::string run_id, std::string local_addr);

  // Forms the next round: previous is the round this node last took part in, if any.
  virtual FormedRound join(const std::optional<FormedRound>& previous) = 0;
  // Whether membership may change (c10d: heartbeats, scale-down on leave) or is fixed (static:
  // rounds only wake each other for failures).
  virtual bool elastic() const = 0;
  // The job ends with round `round`: make any later round that is still forming fail with
  // `error` (an "error ..." value) instead of waiting for this node.
  virtual void close_later_rounds(uint64_t round, const std::string& error) = 0;

  rendezvous::store::StoreClient& store() { return *client_; }
  const RdzvKeys& keys() const { return keys_; }
  const RdzvSettings& settings() const { return settings_; }
  const launcher::LaunchConfig& config() const { return config_; }
  const StoreEndpoint& endpoint() const { return endpoint_; }
  const NodeRecord& self() const { return self_; }
  const std::string& run_id() const { return run_id_; }
  // "rendezvous '<id>' at host:port"
  std::string where() const;
  static std::chrono::milliseconds millis(double seconds);
  static double now_s();

 private:
  void stop_watcher();
  void start_watcher(const FormedRound& round);
  template <typename F>
  auto guarded(const char* what, F&& f) -> decltype(f());

  launcher::LaunchConfig config_;
  RdzvSettings settings_;
  StoreEndpoint endpoint_;
  std::string run_id_;
  RdzvKeys keys_;
  NodeRecord self_;
  std::unique_ptr<rendezvous::store::StoreClient> client_;
  std::unique_ptr<rendezvous::store::StoreClient> watch_client_;  // lent to each round's watcher
  EventFd wakeup_;
  std::optional<FormedRound> current_;
  std::unique_ptr<RoundWatcher> watcher_;
  RoundSignal signal_ = RoundSignal::kNone;  // once decided for the round, it stays
  bool exit_barrier_attempted_ = false;
  bool shut_down_ = false;
};

// "2.5" for messages.
std::string seconds_text(double seconds);

// A random hex string (run ids, nonces).
std::string random_hex(std::size_t bytes);

}  // namespace ddprun::agent::rdzv
