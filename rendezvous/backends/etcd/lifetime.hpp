#pragma once
// Guards callbacks that capture `this` against running after the object is gone.
//
// Asio may run a handler after its owner was destroyed (a timer that already expired when it
// was cancelled, a completion queued behind the destructor). An owner keeps a Lifetime as a
// member and wraps every handler that captures `this` in guard(): once the owner (and so the
// Lifetime) is destroyed, the wrapped handler does nothing. Single-threaded use only.

#include <memory>
#include <utility>

namespace ddprun::rendezvous::backends::etcd {

class Lifetime {
 public:
  Lifetime() = default;
  Lifetime(const Lifetime&) = delete;
  Lifetime& operator=(const Lifetime&) = delete;

  template <typename Handler>
  auto guard(Handler handler) const {
    return [alive = std::weak_ptr<const char>(token_),
            handler = std::move(handler)](auto&&... args) mutable {
      if (!alive.expired()) {
        handler(std::forward<decltype(args)>(args)...);
      }
    };
  }

 private:
  std::shared_ptr<const char> token_ = std::make_shared<const char>('\0');
};

}  // namespace ddprun::rendezvous::backends::etcd
