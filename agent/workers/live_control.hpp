#pragma once
// Live recovery's channel from an agent to its own workers (--recovery live). The agent names a
// control file in each worker's environment (DDPRUN_LIVE_CONTROL) and replaces it atomically
// (a rename) whenever the world changes; a worker that takes part in live recovery says so by
// writing its pid into "<control>.joined.<LOCAL_RANK>" once its process group is up. The file:
//
//   ddprun-live 1
//   generation 7          the round; grows with every change
//   state running         or "reforming": a node was lost or waits to join, the round re-forms;
//                         abort the collectives in flight and wait for the next generation
//   base_rank 2           running only: this node's global rank of LOCAL_RANK 0
//   world_size 6
//   master_addr node-a    the round's fresh store for its workers
//   master_port 29512
//   restart_count 0       its keys live under "/worker/attempt_<restart_count>", as at a start
//
// Pure text in and out, plus the two file operations; what to do with them is the run loop's.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/base/round_types.hpp"

namespace ddprun::agent {

inline constexpr const char* kLiveControlVariable = "DDPRUN_LIVE_CONTROL";

// The control file's text for a round that runs (its workers' world), or that re-forms.
std::string live_control_running(const RoundInfo& round);
std::string live_control_reforming(uint64_t generation);

// Replaces `path` with `text` atomically (a temporary file beside it, then a rename). Throws
// std::runtime_error naming the path.
void write_live_control(const std::string& path, const std::string& text);

// "<control>.joined.<local_rank>"
std::string live_joined_path(const std::string& control_path, int local_rank);

// Whether the worker of `local_rank` with `pid` said it takes part: its joined file holds its
// pid (a file left by an earlier worker of that local rank does not count).
bool worker_joined_live(const std::string& control_path, int local_rank, pid_t pid);

// What a membership change does to this node's workers under --recovery live.
struct LiveWorker {
  int local_rank = 0;
  bool running = false;  // not exited, not abandoned
  bool joined = false;   // worker_joined_live
};
struct LiveKeepDecision {
  bool keep = false;
  std::string reason;  // when !keep: why they are stopped instead, for the notice
};
// Pure: keep the group only when every worker still runs and joined.
LiveKeepDecision decide_live_keep(const std::vector<LiveWorker>& workers);

}  // namespace ddprun::agent
