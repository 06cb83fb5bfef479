// libFuzzer target: arbitrary bytes through generation detection, the request decoder and
// the store state, as a connection of the server would feed them. Any crash, sanitizer
// report, or a decoder that consumes nothing or more than it was given, is a finding.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "rendezvous/store/memory_budget.hpp"
#include "rendezvous/store/request_decoder.hpp"
#include "rendezvous/store/store_state.hpp"
#include "tests/rendezvous/fuzz/next_request.hpp"

using namespace ddprun::rendezvous::store;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  StoreLimits limits;
  limits.max_value_bytes = 1 << 16;  // keep the fuzzer's memory small; logic is the same
  limits.max_keys_per_request = 1024;
  MemoryBudget budget(1 << 22);
  std::vector<OutgoingMessage> out;
  {
    StoreState state(budget);
    std::span<const std::uint8_t> input(data, size);
    const auto generation = detect_generation(input, WireGeneration::g0);
    if (!generation) {
      return 0;
    }
    // Two connections share the state, so wake-ups cross between them.
    ConnectionId connection = 1;
    while (auto request = fuzzing::next_request(input, *generation, limits)) {
      out.clear();
      if (state.handle(connection, *request, out)) {
        state.disconnect(connection);
      }
      connection = connection == 1 ? 2 : 1;
    }
    state.disconnect(1);
    state.disconnect(2);
  }
  if (budget.used() != 0) {
    std::abort();  // the state gave back everything it charged
  }
  return 0;
}
