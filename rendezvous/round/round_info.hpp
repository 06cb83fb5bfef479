#pragma once
// What the round protocol tells the agent and what the agent tells it back: a formed round,
// a worker failure, and the error that ends a rendezvous.

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/seconds.hpp"

namespace ddprun::rendezvous::round {

// A rendezvous that cannot go on: join timeout, closed rendezvous, configuration mismatch
// between agents, unreachable or malformed store. what() is the message shown to the user.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One formed round, the same on every node of it except the per-node fields.
struct RoundInfo {
  uint64_t round = 0;
  int group_rank = 0;        // per node
  int group_world_size = 1;  // number of nodes in the round
  int base_global_rank = 0;  // per node: global rank of this node's local rank 0
  int world_size = 1;        // sum of every node's nproc_per_node
  int restart_count = 0;     // job-wide TORCHELASTIC_RESTART_COUNT for this round
  std::string master_addr;   // the workers' store for this round (its keys are fresh)
  uint16_t master_port = 0;
  std::string run_id;
};

// A moment as records carry it: seconds since the unix epoch.
using UnixTime = std::chrono::time_point<std::chrono::system_clock, common::Seconds>;

constexpr UnixTime unix_time(double seconds_since_epoch) {
  return UnixTime{common::Seconds{seconds_since_epoch}};
}

struct WorkerFailure {
  UnixTime timestamp{};
  std::string host;
  int global_rank = -1;
  int local_rank = -1;
  int exit_code = 0;  // >= 0 exit status; < 0 minus the signal number
  int pid = 0;
  std::string error_file;  // path, or empty
  std::string message;     // from the error file, or the signal text
  // Seen while the round stopped this node's workers because others had failed: it follows
  // the job's root cause (the round had acted on that one already) whatever its time, so every
  // node that reads the round's failures names the same root cause.
  bool while_stopped = false;
};

}  // namespace ddprun::rendezvous::round
