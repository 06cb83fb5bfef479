#pragma once
// Stacks from the job page: on the round's node 0, a request the page made (HealthBoard::
// ask_for_stacks) goes to every node of the round as `ddprun stacks` sends it (the round's
// stacks request key, numbered by its counter); each node's StacksOnDemand captures its workers'
// stacks and answers with where it wrote them and their text (stacks_answer.hpp). The answers,
// or why there are none, go back to the HealthBoard for the page. One request at a time; a press
// while one is out is ignored.
//
// It shares the round's KvBackend with the round driver, with op ids of its own
// (kPageStacksOpIds). Threading: the agent's event loop.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/health/health_board.hpp"
#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/backends/kv_side_client.hpp"
#include "rendezvous/round/round_info.hpp"

namespace ddprun::agent {

class PageStacks {
 public:
  // How long the nodes have to answer (a capture is bounded by 10 s on each node).
  static constexpr std::chrono::seconds kAnswerLimit{30};

  PageStacks(rendezvous::backends::KvBackend& backend, HealthBoard& board, std::string host);
  PageStacks(const PageStacks&) = delete;
  PageStacks& operator=(const PageStacks&) = delete;

  void round_started(const rendezvous::round::RoundInfo& round);
  void round_ended();
  // From the loop's health timer: takes a request the page made, if any.
  void tick();

 private:
  void ask();
  void collect(uint64_t request);
  void fail(std::string why);
  std::vector<std::string> answer_keys(uint64_t request) const;

  rendezvous::backends::KvSideClient kv_;
  HealthBoard& board_;
  std::string host_;
  std::optional<rendezvous::round::RoundInfo> round_;
  bool busy_ = false;
  PageStacksState state_;
};

}  // namespace ddprun::agent
