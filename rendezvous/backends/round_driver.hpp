#pragma once
// Drives one node's round machine on an Asio io_context: carries its key-value ops out through
// a KvBackend, arms one timer for its next deadline, reads the monotonic clock for every event,
// and hands the decisions meant for the agent (start or stop workers, host the workers' store,
// notices, the end) to a RoundListener. The agent's run loop uses one; the scale simulator runs
// thousands in one process.
//
// Threading: single-threaded on the io_context. Listener calls come from inside feed() or from
// a completion on the io_context; a listener may call feed() again from inside them (events are
// queued, never nested).

#include <deque>
#include <memory>

#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/round/machine_time.hpp"
#include "rendezvous/round/round_machine.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::rendezvous::backends {

class RoundListener {
 public:
  virtual ~RoundListener() = default;
  // Start a store for this round's workers; answer with WorkersStoreHosted/WorkersStoreFailed.
  virtual void host_workers_store(uint64_t round) = 0;
  virtual void start_workers(const round::RoundInfo& round) = 0;
  // Answer with WorkersStopped once every worker has been reaped.
  virtual void stop_workers(const round::StopWorkers& stop) = 0;
  virtual void notice(const round::Notice& notice) = 0;
  virtual void finished(const round::Finish& finish) = 0;
};

// What an agent that watches its workers for hangs adds: the stacks of its workers, captured
// when a worker of the job hangs. A driver without one answers every capture request at once
// (no stacks here) and has no hung worker of its own to hold back.
class StackCapturer {
 public:
  virtual ~StackCapturer() = default;
  // Another node's worker hung: capture the local workers' stacks, then answer StacksCaptured.
  virtual void capture_stacks(const round::CaptureStacks& request) = 0;
  // Answer to HangDetected: the hung local worker may be signalled now.
  virtual void peers_captured_stacks() = 0;
};

// What an agent with node checks (--health-check) adds: runs them when the machine asks, before
// each join, and answers NodeChecked. A driver without one answers every request at once: passed.
class NodeChecker {
 public:
  virtual ~NodeChecker() = default;
  virtual void check_node(const round::CheckNode& request) = 0;
};

class RoundDriver {
 public:
  // stacks: nullptr when the agent has no worker stacks to capture; checker: nullptr when the
  // node has no checks to run.
  RoundDriver(boost::asio::io_context& io, round::MachineConfig config,
              std::unique_ptr<KvBackend> backend, RoundListener& listener,
              StackCapturer* stacks = nullptr, NodeChecker* checker = nullptr);
  RoundDriver(const RoundDriver&) = delete;
  RoundDriver& operator=(const RoundDriver&) = delete;

  void begin() { feed(round::Begin{}); }
  // An event from the agent (workers, signals, the workers' store); the time is read here.
  void feed(round::MachineEvent event);

  bool finished() const { return machine_.finished(); }
  const round::RoundMachine& machine() const { return machine_; }
  KvBackend& backend() { return *backend_; }

 private:
  void carry_out();
  void arm_timer();

  round::RoundMachine machine_;
  std::unique_ptr<KvBackend> backend_;
  RoundListener& listener_;
  StackCapturer* stacks_;
  NodeChecker* checker_;
  boost::asio::steady_timer timer_;
  std::deque<round::MachineEvent> queue_;
  bool stepping_ = false;
  // Guards completions that outlive this driver (the backend is destroyed with it, dropping
  // its pending completions, but a timer handler may already be queued).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Now on the monotonic clock, as the machine's time.
round::MachineTime machine_now();

}  // namespace ddprun::rendezvous::backends
