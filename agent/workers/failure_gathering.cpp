#include "agent/workers/failure_gathering.hpp"

#include <algorithm>

namespace ddprun::agent {

namespace {
// How often a runnable worker is looked at again: well under the scheduler's slice, so an exit
// on the way is caught soon after it lands, and cheap (one /proc read per running worker).
constexpr FailureGathering::Duration kPoll = std::chrono::milliseconds(1);
}  // namespace

bool FailureGathering::stop_now(const Now& now) const {
  if (!now.any_running)
    return true;  // nothing left to stop: the group is down, every failure seen
  if (now.since_first_failure >= kLimit)
    return true;
  if (now.since_first_failure < min_wait())
    return false;
  return !now.any_runnable;
}

FailureGathering::Duration FailureGathering::look_again_after(const Now& now) const {
  const Duration until_limit = kLimit - now.since_first_failure;
  if (now.since_first_failure < min_wait())
    return std::min(min_wait() - now.since_first_failure, until_limit);
  return std::min(kPoll, until_limit);
}

}  // namespace ddprun::agent
