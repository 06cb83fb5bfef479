#include "agent/stacks/stacks_on_demand.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

#include "agent/stacks/stacks_answer.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

namespace {

// The start of each rank's stack file (<dir>/rank<N>.txt), within the answer's bounds.
std::map<int, std::string> read_stack_texts(const std::string& dir, const std::vector<int>& ranks) {
  std::map<int, std::string> texts;
  std::size_t total = 0;
  for (const int rank : ranks) {
    std::ifstream file(dir + "/rank" + std::to_string(rank) + ".txt", std::ios::binary);
    if (!file)
      continue;
    std::string text(kMaxStackText, '\0');
    file.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(file.gcount()));
    if (total + text.size() > kMaxStacksTextTotal)
      break;
    total += text.size();
    texts[rank] = std::move(text);
  }
  return texts;
}

}  // namespace

StacksOnDemand::StacksOnDemand(rendezvous::backends::KvBackend& backend, std::string host,
                               Capture capture, EventLog& events,
                               std::function<void()> before_print)
    : kv_(backend, rendezvous::backends::kStacksOnDemandOpIds),
      host_(std::move(host)),
      capture_(std::move(capture)),
      events_(events),
      before_print_(std::move(before_print)) {}

void StacksOnDemand::round_started(const round::RoundInfo& round, std::vector<int> ranks) {
  kv_.reset();
  ++generation_;
  if (!round_ || round_->round != round.round)
    next_request_ = 1;  // a restart within one round keeps counting its requests
  round_ = round;
  ranks_ = std::move(ranks);
  wait_for_request();
}

void StacksOnDemand::round_ended() {
  kv_.reset();
  ++generation_;
  if (round_)
    round_->group_rank = -1;  // keeps the round number (and so the request count) only
}

void StacksOnDemand::wait_for_request() {
  const uint64_t request = next_request_;
  kv_.start(
      round::KvWait{{keys().stacks_request(round_->round, request)},
                    std::chrono::duration_cast<std::chrono::milliseconds>(kStacksRequestWait)},
      [this, request](round::KvResult result) {
        const auto* ready = std::get_if<round::KvReady>(&result);
        if (ready == nullptr)
          return;  // the store failed: the round machine reports it
        if (!ready->ready) {
          wait_for_request();
          return;
        }
        capture_([this, request, generation = generation_](const std::string& dir) {
          if (generation == generation_)
            answer(request, dir);
        });
      });
}

void StacksOnDemand::answer(uint64_t request, const std::string& stacks_dir) {
  StacksAnswer answer;
  answer.host = host_;
  answer.group_rank = round_->group_rank;
  answer.nodes = round_->group_world_size;
  answer.stacks_dir = stacks_dir;
  if (!stacks_dir.empty()) {
    answer.ranks = ranks_;
    answer.stacks = read_stack_texts(stacks_dir, ranks_);
  }
  before_print_();
  std::fprintf(stderr, "ddprun: stacks asked for (ddprun stacks, request %llu): %s\n",
               static_cast<unsigned long long>(request),
               stacks_dir.empty() ? "nothing captured" : stacks_dir.c_str());
  std::fflush(stderr);
  events_.record("stacks_on_demand", {{"request", request}, {"stacks_dir", stacks_dir}});
  kv_.start(round::KvSet{keys().stacks_taken(round_->round, request, round_->group_rank),
                         stacks_answer_to_json(answer)},
            [](round::KvResult) {});
  ++next_request_;
  wait_for_request();
}

}  // namespace ddprun::agent
