#pragma once
// `ddprun stacks`: what one node answers to a request (where it wrote its workers' stacks), as
// the JSON record it stores under the round's stacks_taken key, and back. The record comes
// from the store, which anyone on the network can write to: reading it back validates every
// field and bounds every length and count. Pure.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace ddprun::agent {

inline constexpr std::size_t kMaxStacksAnswerBytes = 512 * 1024;
// The stacks themselves ride along for the job page: each rank's text cut at kMaxStackText, and
// no more of them once kMaxStacksTextTotal is reached (the files hold them whole).
inline constexpr std::size_t kMaxStackText = 16 * 1024;
inline constexpr std::size_t kMaxStacksTextTotal = 384 * 1024;
inline constexpr std::size_t kMaxStacksAnswerRanks = 4096;
inline constexpr std::size_t kMaxStacksAnswerText = 4096;  // host, folder
inline constexpr int kMaxStacksAnswerNodes = 1 << 20;

struct StacksAnswer {
  std::string host;
  int group_rank = 0;
  int nodes = 1;           // the round's node count, so the asker knows how many to wait for
  std::string stacks_dir;  // empty: nothing captured (no running workers, or it failed)
  std::vector<int> ranks;  // the global ranks whose stacks are there
  std::map<int, std::string> stacks;  // global rank -> its stack file's text (bounded, above)
};

std::string stacks_answer_to_json(const StacksAnswer& answer);
// Throws std::invalid_argument naming the field at fault.
StacksAnswer stacks_answer_from_json(const std::string& text);

// "node 1 (host b): ranks 2-3: /logs/run/attempt_0/stacks" for the command's output.
std::string describe_stacks_answer(const StacksAnswer& answer);

}  // namespace ddprun::agent
