#pragma once
// The trainer's side of live recovery's control file (--recovery live; the agent writes it, see
// agent/workers/live_control.hpp for its lines): parsing, pure, and what it makes of a worker's
// environment. The file comes from this node's agent, but it is still a file: every field is
// checked and bounded, and anything else is refused with the reason.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "run_environment.hpp"

namespace ddprun::train {

inline constexpr size_t kMaxLiveControlBytes = 4096;

struct LiveWorld {
  uint64_t generation = 0;
  bool running = false;  // false: the round re-forms, no world yet
  int64_t base_rank = 0;
  int64_t world_size = 1;
  std::string master_addr;
  int64_t master_port = 0;
  int64_t restart_count = 0;
};

class LiveControlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws LiveControlError naming what is wrong.
LiveWorld parse_live_control(std::string_view text);

// The environment of this worker in `world` (running): its rank, the world, the round's store.
RunEnvironment environment_in(const RunEnvironment& start, const LiveWorld& world);

}  // namespace ddprun::train
