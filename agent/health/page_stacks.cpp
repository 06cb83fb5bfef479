#include "agent/health/page_stacks.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "rendezvous/round/round_keys.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

PageStacks::PageStacks(rendezvous::backends::KvBackend& backend, HealthBoard& board,
                       std::string host)
    : kv_(backend, rendezvous::backends::kPageStacksOpIds), board_(board), host_(std::move(host)) {}

void PageStacks::round_started(const round::RoundInfo& round) {
  kv_.reset();
  busy_ = false;
  round_ = round;
}

void PageStacks::round_ended() {
  kv_.reset();
  round_.reset();
  if (busy_)
    fail("the round ended before every node answered");
  busy_ = false;
}

void PageStacks::tick() {
  if (!board_.take_stacks_request() || busy_)
    return;
  if (!round_ || round_->group_rank != 0) {
    state_ = {PageStacksState::Phase::kFailed,
              state_.request,
              "no workers are running here: stacks are asked for from the round's node 0",
              {}};
    board_.publish_stacks(state_);
    return;
  }
  ask();
}

void PageStacks::ask() {
  busy_ = true;
  state_ = {PageStacksState::Phase::kCapturing, state_.request, "", {}};
  board_.publish_stacks(state_);
  const round::RoundKeys keys(round_->run_id);
  kv_.start(round::KvAdd{keys.stacks_requests(round_->round), 1}, [this](round::KvResult added) {
    const auto* counter = std::get_if<round::KvCounter>(&added);
    if (counter == nullptr || counter->value < 1)
      return fail("cannot number the request in the round's store");
    const auto request = static_cast<uint64_t>(counter->value);
    state_.request = request;
    board_.publish_stacks(state_);
    const nlohmann::json from = {{"host", host_}, {"from", "job page"}};
    const round::RoundKeys round_keys(round_->run_id);
    kv_.start(
        round::KvSet{round_keys.stacks_request(round_->round, request), from.dump()},
        [this, request](round::KvResult set) {
          if (!std::holds_alternative<round::KvDone>(set))
            return fail("cannot place the request in the round's store");
          kv_.start(
              round::KvWait{answer_keys(request),
                            std::chrono::duration_cast<std::chrono::milliseconds>(kAnswerLimit)},
              [this, request](round::KvResult) { collect(request); });
        });
  });
}

void PageStacks::collect(uint64_t request) {
  kv_.start(round::KvMultiGet{answer_keys(request)}, [this](round::KvResult result) {
    const auto* values = std::get_if<round::KvValues>(&result);
    if (values == nullptr)
      return fail("cannot read the answers from the round's store");
    busy_ = false;
    state_.phase = PageStacksState::Phase::kDone;
    state_.answers.clear();
    for (const auto& value : values->values)
      state_.answers.push_back(value.value_or(""));
    board_.publish_stacks(state_);
  });
}

void PageStacks::fail(std::string why) {
  busy_ = false;
  state_.phase = PageStacksState::Phase::kFailed;
  state_.problem = std::move(why);
  board_.publish_stacks(state_);
}

std::vector<std::string> PageStacks::answer_keys(uint64_t request) const {
  const round::RoundKeys keys(round_->run_id);
  std::vector<std::string> answers;
  for (int group_rank = 0; group_rank < round_->group_world_size; ++group_rank)
    answers.push_back(keys.stacks_taken(round_->round, request, group_rank));
  return answers;
}

}  // namespace ddprun::agent
