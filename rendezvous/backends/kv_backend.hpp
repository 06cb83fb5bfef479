#pragma once
// What a rendezvous backend does for the round machine: carries out its key-value operations
// (round/kv_ops.hpp) asynchronously on one Asio io_context.
//
// Threading: single-threaded. start(), cancel() and close() are called on the io_context's
// thread, and every completion runs there, never inside the call that started the op.
// Lifetime: destroying the backend abandons pending ops; their completions never run.

#include <cstdint>
#include <functional>
#include <string>

#include "rendezvous/round/kv_ops.hpp"

namespace ddprun::rendezvous::backends {

// Op ids of the backend's users besides the round machine (which numbers its ops from 1): each
// counts up from a base of its own, so ids never collide.
inline constexpr uint64_t kStacksOnDemandOpIds = uint64_t{1} << 62;
inline constexpr uint64_t kStragglerWatchOpIds = (uint64_t{1} << 62) + (uint64_t{1} << 61);
inline constexpr uint64_t kJobViewOpIds = (uint64_t{1} << 62) + (uint64_t{1} << 60);
inline constexpr uint64_t kPageStacksOpIds = (uint64_t{1} << 62) + (uint64_t{1} << 59);

class KvBackend {
 public:
  using Completion = std::function<void(round::KvResult)>;

  KvBackend() = default;
  // Polymorphic: copying through the base would slice.
  KvBackend(const KvBackend&) = delete;
  KvBackend& operator=(const KvBackend&) = delete;
  virtual ~KvBackend() = default;

  // Starts op. `id` is the caller's name for it (unique among pending ops), used by cancel().
  // Ops issued while the backend (re)connects queue until it is connected or its connect
  // budget runs out (then they complete with KvError{kUnreachable}).
  virtual void start(uint64_t id, round::KvOp op, Completion done) = 0;

  // Abandons a pending op (in practice a KvWait nobody waits for any more): its completion
  // never runs. Unknown or finished ids are ignored.
  virtual void cancel(uint64_t id) = 0;

  // Leaves cleanly: finishes the ops already started, releases what the backend holds for this
  // agent (an etcd lease, so its beat keys vanish at once), closes connections, then runs
  // done. Ops started afterwards fail with kUnreachable.
  virtual void close(std::function<void()> done) = 0;

  // Where the store is, for messages: "127.0.0.1:29400", "etcd 127.0.0.1:2379,127.0.0.2:2379".
  virtual std::string describe() const = 0;
};

// "unreachable", "unresponsive", "protocol error", "rejected": for messages and logs.
std::string to_string(round::KvErrorKind kind);

}  // namespace ddprun::rendezvous::backends
