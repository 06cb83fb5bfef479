#pragma once
// The job page's view of the round's other nodes, through the round's store. The round's node 0
// serves the page. While someone looks (its API was asked for within kViewLease), it asks the
// other nodes for their records by writing request key n (at most once per kRequestEvery), and
// reads their records (the round's job_view_node keys) at each tick of the loop's health timer,
// handing them to the HealthBoard. Every other node waits for the next request key; when it
// appears, it publishes its record (node_record.hpp) at once and again every kPublishEvery until
// kPublishFor after the request, then waits for the next one. Nobody looking costs node 0
// nothing and the others one pending wait, renewed every kRequestWait. At each round node 0 says
// where it serves the page (the round's job_view_page key), so that the others redirect there.
//
// It shares the round's KvBackend with the round driver, with op ids of its own
// (kJobViewOpIds). A store error skips a tick quietly: the round machine sees the same store and
// reports it. Threading: the agent's event loop.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "agent/health/health_board.hpp"
#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/backends/kv_side_client.hpp"
#include "rendezvous/round/round_info.hpp"

namespace ddprun::agent {

class JobViewExchange {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kViewLease{10};
  static constexpr std::chrono::seconds kRequestEvery{8};
  static constexpr std::chrono::seconds kPublishEvery{2};
  static constexpr std::chrono::seconds kPublishFor{12};
  static constexpr std::chrono::seconds kRequestWait{30};

  // record(): this node's record as JSON, now. page_port: the port this agent serves the page
  // on (node 0 names it, with its address, for the others' redirects).
  JobViewExchange(rendezvous::backends::KvBackend& backend, HealthBoard& board,
                  std::function<std::string()> record, uint16_t page_port);
  JobViewExchange(const JobViewExchange&) = delete;
  JobViewExchange& operator=(const JobViewExchange&) = delete;

  void round_started(const rendezvous::round::RoundInfo& round);
  void round_ended();
  // From the loop's health timer, about every second.
  void tick(Clock::time_point now);
  // On the other nodes: where node 0 serves the page, "host:port" ("" until known).
  const std::string& page_location() const { return page_location_; }

 private:
  void ask_and_read(Clock::time_point now);
  void wait_for_request();
  void publish();
  void learn_page_location();

  rendezvous::backends::KvSideClient kv_;
  HealthBoard& board_;
  std::function<std::string()> record_;
  std::optional<rendezvous::round::RoundInfo> round_;
  uint64_t next_request_ = 1;
  std::optional<Clock::time_point> last_request_;  // node 0: when it last asked
  bool reading_ = false;                           // node 0: a read in flight
  bool holding_peers_ = false;                     // node 0: the board holds records read
  Clock::time_point publish_until_{};              // the others: asked to publish until then
  std::optional<Clock::time_point> last_published_;
  uint16_t page_port_;
  std::string page_location_;
};

}  // namespace ddprun::agent
