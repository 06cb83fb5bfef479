#pragma once
// `ddprun stacks` on the agent's side. While this node's workers run in a round, it waits on
// the round's next request key (stacks/<n>); when a request appears, the local workers' stacks
// are captured the way a hang captures them, without signalling anyone, and the node answers
// with where it wrote them (stacks_taken/<n>/<group rank>, a StacksAnswer), prints that line,
// and waits for request n + 1. The end of the round's workers cancels the wait.
//
// It shares the round's KvBackend with the round driver, with op ids of its own
// (kStacksOnDemandOpIds). A store error ends the waiting for this
// round quietly: the round machine sees the same store and reports it.
// Threading: the agent's event loop; completions never run inside the call that started them.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/event_log.hpp"
#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/backends/kv_side_client.hpp"
#include "rendezvous/round/round_info.hpp"
#include "rendezvous/round/round_keys.hpp"

namespace ddprun::agent {

// How long one wait for a request lasts before it is renewed (a store drops idle waits of a
// client it no longer hears from; renewal keeps the wait cheap and fresh).
inline constexpr std::chrono::seconds kStacksRequestWait{30};

class StacksOnDemand {
 public:
  // capture(done): captures the local workers' stacks, then done(folder, "" when none).
  using Capture = std::function<void(std::function<void(const std::string&)>)>;

  StacksOnDemand(rendezvous::backends::KvBackend& backend, std::string host, Capture capture,
                 EventLog& events, std::function<void()> before_print);
  // Destruction cancels its pending ops: their completions never run.
  StacksOnDemand(const StacksOnDemand&) = delete;
  StacksOnDemand& operator=(const StacksOnDemand&) = delete;

  // This node's workers of round, with these global ranks, are running (their pids are known
  // to the capture).
  void round_started(const rendezvous::round::RoundInfo& round, std::vector<int> ranks);
  // They are being stopped: no more waiting, and an answer still to come is dropped.
  void round_ended();

 private:
  void wait_for_request();
  void answer(uint64_t request, const std::string& stacks_dir);
  rendezvous::round::RoundKeys keys() const { return rendezvous::round::RoundKeys(round_->run_id); }

  rendezvous::backends::KvSideClient kv_;
  std::string host_;
  Capture capture_;
  EventLog& events_;
  std::function<void()> before_print_;

  std::optional<rendezvous::round::RoundInfo> round_;
  std::vector<int> ranks_;
  uint64_t next_request_ = 1;  // within round_
  uint64_t generation_ = 0;    // changes with every round_started/round_ended
};

}  // namespace ddprun::agent
