#include "rendezvous/backends/kv_side_client.hpp"

#include <utility>

namespace ddprun::rendezvous::backends {

void KvSideClient::start(round::KvOp op, std::function<void(round::KvResult)> done) {
  const uint64_t id = next_id_++;
  pending_.insert(id);
  backend_.start(id, std::move(op),
                 [this, id, generation = generation_, done = std::move(done)](round::KvResult r) {
                   pending_.erase(id);
                   if (generation == generation_)
                     done(std::move(r));
                 });
}

void KvSideClient::reset() {
  ++generation_;
  for (const uint64_t id : pending_)
    backend_.cancel(id);
  pending_.clear();
}

}  // namespace ddprun::rendezvous::backends
