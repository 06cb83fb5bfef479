#pragma once
// The server's total memory budget: every byte held on behalf of clients (stored data, wait
// registrations, connection buffers) is reserved here first. Owned by one event loop, so
// it needs no locking.

#include <cstddef>

namespace ddprun::rendezvous::store {

class MemoryBudget {
 public:
  explicit MemoryBudget(std::size_t limit) : limit_(limit) {}

  // Reserves bytes if they fit; false (and nothing reserved) when they would not.
  bool try_reserve(std::size_t bytes) {
    if (bytes > limit_ - used_) {
      return false;
    }
    used_ += bytes;
    return true;
  }

  void release(std::size_t bytes) { used_ -= bytes < used_ ? bytes : used_; }

  std::size_t used() const { return used_; }
  std::size_t limit() const { return limit_; }

 private:
  std::size_t limit_;
  std::size_t used_ = 0;
};

}  // namespace ddprun::rendezvous::store
