#pragma once
// One more user of a KvBackend that a round driver owns (the agent's `ddprun stacks` wait, its
// straggler records): op ids counted from a base of its own (kv_backend.hpp), its pending ops
// cancelled together, and a completion that was already queued when they were cancelled
// dropped instead of run.
// Threading: the backend's io_context, as the backend.

#include <cstdint>
#include <functional>
#include <set>

#include "rendezvous/backends/kv_backend.hpp"

namespace ddprun::rendezvous::backends {

class KvSideClient {
 public:
  KvSideClient(KvBackend& backend, uint64_t first_id) : backend_(backend), next_id_(first_id) {}
  ~KvSideClient() { reset(); }  // no completion runs after this
  KvSideClient(const KvSideClient&) = delete;
  KvSideClient& operator=(const KvSideClient&) = delete;

  void start(round::KvOp op, std::function<void(round::KvResult)> done);
  // Cancels every pending op: none of their completions runs.
  void reset();

 private:
  KvBackend& backend_;
  uint64_t next_id_;
  uint64_t generation_ = 0;
  std::set<uint64_t> pending_;
};

}  // namespace ddprun::rendezvous::backends
