#pragma once
// Reading a backend's answer as the type the op promises (kv_ops.hpp). A backend that answers
// with another type is broken: that is a RendezvousError naming the op, not a crash.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/seconds.hpp"
#include "rendezvous/round/kv_ops.hpp"
#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {

template <class Answer>
const Answer& answer_as(const KvResult& result, const char* op) {
  if (const auto* answer = std::get_if<Answer>(&result)) {
    return *answer;
  }
  throw RendezvousError(std::string("the rendezvous store answered ") + op +
                        " with an unexpected reply");
}

inline const std::optional<std::string>& value_of(const KvResult& result) {
  return answer_as<KvValue>(result, "a read").value;
}
inline int64_t counter_of(const KvResult& result) {
  return answer_as<KvCounter>(result, "an add").value;
}
inline bool ready_of(const KvResult& result) {
  return answer_as<KvReady>(result, "a wait").ready;
}
// A wait this node cannot go on without: when it ran out, the rendezvous fails saying what
// was missed.
inline void require_ready(const KvResult& result, const std::string& where,
                          const std::string& missed) {
  if (!ready_of(result)) {
    throw RendezvousError(where + ": " + missed);
  }
}
// The value a ready wait for one key saw, when its backend handed it over; nullptr when the
// key must be read. Only for keys written once: then it is still the key's value.
inline const std::string* waited_value(const KvResult& result) {
  const auto& ready = answer_as<KvReady>(result, "a wait");
  return ready.ready && ready.values.size() == 1 ? &ready.values.front() : nullptr;
}
inline const std::vector<std::optional<std::string>>& values_of(const KvResult& result) {
  return answer_as<KvValues>(result, "a multi-get").values;
}

// A wait's timeout from the time left (never negative), rounded up to whole milliseconds.
inline std::chrono::milliseconds to_millis(common::Seconds left) {
  if (!(left > common::Seconds::zero())) {
    return std::chrono::milliseconds(0);
  }
  // chrono's ceil, not <cmath>'s: ceil() was the one function the agent took from libm, whose
  // mapping cost 0.3 MiB of its peak RSS.
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

}  // namespace ddprun::rendezvous::round
