#pragma once
// The contract between the agent's run loop (worker supervision, restarts) and the
// rendezvous backends (static, c10d). The run loop never talks to the store directly.

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/launch_config.hpp"

namespace ddprun::agent {

// A rendezvous that cannot complete: join timeout, closed rendezvous, configuration mismatch
// between agents, unreachable store. what() is the message shown to the user.
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

// What the run loop must do about the running round, from poll().
enum class RoundSignal {
  kNone,
  kMembershipChange,  // a node waits to join or a participant was lost: re-form, not a restart
  kRestartRequested,  // another node's workers failed and a restart is allowed: re-form
  kJobFailed,         // another node's workers failed and restarts are exhausted: stop
};

struct WorkerFailure {
  double timestamp_s = 0;  // unix epoch seconds
  std::string host;
  int global_rank = -1;
  int local_rank = -1;
  int exit_code = 0;  // >= 0 exit status; < 0 minus the signal number
  int pid = 0;
  std::string error_file;  // path, or empty
  std::string message;     // from the error file, or the signal text
};

class RendezvousHandler {
 public:
  virtual ~RendezvousHandler() = default;

  // Blocks until this node is a participant of a complete round. Throws RendezvousError.
  virtual RoundInfo next_round() = 0;

  // Becomes readable whenever poll() may return something other than kNone, so the run loop
  // blocks on it (with its SIGCHLD and signal descriptors) instead of polling.
  virtual int wakeup_fd() const = 0;
  // Throws RendezvousError when the store was lost (e.g. its host died) during the round.
  virtual RoundSignal poll() = 0;

  // This node's worker group failed. Publishes the failures job-wide and asks every node to
  // restart. Returns true when a restart is allowed (the job-wide restart counter is still
  // within max_restarts); false when restarts are exhausted and every node stops. A failure in
  // a round that already lost a node (c10d) is a consequence of the loss: it is not counted,
  // not published, and returns true (re-form).
  virtual bool report_failure(const std::vector<WorkerFailure>& failures) = 0;

  // Every failure published in this job, the root cause (earliest) first.
  virtual std::vector<WorkerFailure> job_failures() = 0;

  // Workers succeeded: waits up to timeout for the round's other nodes to finish too. The
  // agent that hosts the store stays until every agent has left.
  virtual void exit_barrier(std::chrono::duration<double> timeout) = 0;

  // Leaves the rendezvous. close_rendezvous=false when the agent was stopped by a signal, so
  // the other nodes can scale down instead of failing.
  virtual void shutdown(bool close_rendezvous) = 0;
};

// Builds the backend the configuration names (static, c10d; --standalone is c10d).
std::unique_ptr<RendezvousHandler> make_rendezvous_handler(const launcher::LaunchConfig& config);

}  // namespace ddprun::agent
