#pragma once
// What both store fuzzers do with their input first: decode it one request at a time, checking
// the decoder's promises on the way (need_more asks only for bytes not yet given; a complete
// request consumes some bytes, and never more than there are). A broken promise aborts: that is
// the finding.

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <utility>
#include <span>

#include "rendezvous/store/request_decoder.hpp"

namespace ddprun::rendezvous::store::fuzzing {

// The next complete request, with `input` moved past it; nothing at the end of the input or at
// bytes the decoder refuses.
inline std::optional<Request> next_request(std::span<const std::uint8_t>& input,
                                           WireGeneration generation, const StoreLimits& limits) {
  if (input.empty()) {
    return std::nullopt;
  }
  auto result = decode_request(input, generation, limits);
  if (result.status != DecodeStatus::complete) {
    if (result.status == DecodeStatus::need_more && result.min_bytes <= input.size()) {
      std::abort();
    }
    return std::nullopt;
  }
  if (result.consumed == 0 || result.consumed > input.size()) {
    std::abort();
  }
  input = input.subspan(result.consumed);
  return std::move(result.request);
}

}  // namespace ddprun::rendezvous::store::fuzzing
