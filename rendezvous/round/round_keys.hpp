#pragma once
// Names of the rendezvous keys, in one place. Job-wide keys live under
// ddprun/rdzv/<run_id>/, a round's under ddprun/rdzv/<run_id>/r<round>/: a new round never sees
// an old round's keys, and an agent of an old round only ever touches old keys (fencing).

#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::rendezvous::round {

class RoundKeys {
 public:
  explicit RoundKeys(const std::string& run_id) : prefix_("ddprun/rdzv/" + run_id + "/") {}

  // Job-wide.
  std::string config() const { return prefix_ + "config"; }      // --nnodes of the first node
  std::string round() const { return prefix_ + "round"; }        // the round now forming
  std::string restarts() const { return prefix_ + "restarts"; }  // ADD counter
  std::string job_closed() const { return prefix_ + "closed"; }  // set by shutdown(true)

  // Per round.
  std::string in_round(uint64_t round, const std::string& name) const {
    return prefix_ + "r" + std::to_string(round) + "/" + name;
  }
  // The round's failures, APPENDed JSON lines: the summary shows the last round's, as torchrun.
  std::string failures(uint64_t r) const { return in_round(r, "failures"); }
  std::string joined(uint64_t r) const { return in_round(r, "joined"); }
  std::string expected(uint64_t r) const { return in_round(r, "expected"); }
  std::string close_claim(uint64_t r) const { return in_round(r, "close_claim"); }
  std::string closed(uint64_t r) const { return in_round(r, "closed"); }
  std::string master(uint64_t r) const { return in_round(r, "master"); }
  std::string waiting(uint64_t r) const { return in_round(r, "waiting"); }
  std::string lost(uint64_t r) const { return in_round(r, "lost"); }
  // A worker's collective broke (live recovery): the first node to claim it counts the loss.
  std::string suspect_claim(uint64_t r) const { return in_round(r, "suspect_claim"); }
  std::string fail_claim(uint64_t r) const { return in_round(r, "fail_claim"); }
  std::string failed(uint64_t r) const { return in_round(r, "failed"); }
  std::string reform(uint64_t r) const { return in_round(r, "reform"); }
  std::string exit_count(uint64_t r) const { return in_round(r, "exit"); }
  std::string exit_done(uint64_t r) const { return in_round(r, "exit_done"); }
  std::string left(uint64_t r) const { return in_round(r, "left"); }
  // A node whose worker hung: one line naming it and the hung ranks (the last to report wins).
  std::string hang(uint64_t r) const { return in_round(r, "hang"); }
  std::string all_left(uint64_t r) const { return in_round(r, "all_left"); }
  std::string node(uint64_t r, int slot) const { return slotted(r, "node", slot); }
  std::string assignment(uint64_t r, int slot) const { return slotted(r, "assign", slot); }
  std::string wake(uint64_t r, int slot) const { return slotted(r, "wake", slot); }
  std::string heartbeat(uint64_t r, int slot) const { return slotted(r, "hb", slot); }
  // Set once the node in slot captured its workers' stacks for a hang in the round.
  std::string hang_ack(uint64_t r, int slot) const { return slotted(r, "hang_ack", slot); }
  // `ddprun stacks`: a counter numbering the round's requests, request n (its existence asks
  // every node of the round for its workers' stacks), and each node's answer (by group rank).
  // Straggler detection: the median step intervals of the node with this group rank's ranks.
  std::string step_times(uint64_t r, int group_rank) const {
    return slotted(r, "steps", group_rank);
  }
  std::string stacks_requests(uint64_t r) const { return in_round(r, "stacks_requests"); }
  std::string stacks_request(uint64_t r, uint64_t n) const {
    return in_round(r, "stacks/" + std::to_string(n));
  }
  std::string stacks_taken(uint64_t r, uint64_t n, int group_rank) const {
    return in_round(r, "stacks_taken/" + std::to_string(n)) + "/" + std::to_string(group_rank);
  }
  // The job page: request n (its existence asks every node of the round to publish its record
  // for a while), and each node's record, overwritten while it does (by group rank).
  std::string job_view_request(uint64_t r, uint64_t n) const {
    return in_round(r, "job_view/" + std::to_string(n));
  }
  std::string job_view_node(uint64_t r, int group_rank) const {
    return slotted(r, "job_view_node", group_rank);
  }
  // Where node 0 serves the job page ("host:port"), for the other nodes' redirects.
  std::string job_view_page(uint64_t r) const { return in_round(r, "job_view_page"); }

  // Keys for slots 1..count.
  template <typename KeyOf>
  std::vector<std::string> for_slots(int count, KeyOf key_of) const {
    std::vector<std::string> keys;
    keys.reserve(static_cast<std::size_t>(count));
    for (int slot = 1; slot <= count; ++slot) {
      keys.push_back(key_of(slot));
    }
    return keys;
  }

 private:
  std::string slotted(uint64_t r, const char* name, int slot) const {
    return in_round(r, name) + "/" + std::to_string(slot);
  }
  std::string prefix_;
};

}  // namespace ddprun::rendezvous::round
