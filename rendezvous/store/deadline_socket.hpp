#pragma once
// A blocking TCP connection whose every operation is bounded by a deadline (poll() based).
// Used by the store client; owns its descriptor.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::store {

using Deadline = std::chrono::steady_clock::time_point;

// The connection failed or the peer closed it.
class SocketBroken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The deadline passed before the operation finished; the connection is intact.
class SocketTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DeadlineSocket {
 public:
  DeadlineSocket() = default;
  DeadlineSocket(const DeadlineSocket&) = delete;
  DeadlineSocket& operator=(const DeadlineSocket&) = delete;
  DeadlineSocket(DeadlineSocket&& other) noexcept;
  DeadlineSocket& operator=(DeadlineSocket&& other) noexcept;
  ~DeadlineSocket();

  // One attempt at every address of host:port; throws SocketBroken with the last error.
  static DeadlineSocket connect(const std::string& host, std::uint16_t port, Deadline deadline);

  bool is_open() const { return fd_ >= 0; }
  void close();

  void send_all(std::string_view bytes, Deadline deadline);
  void receive_exact(void* destination, std::size_t size, Deadline deadline);
  // True when the connection cannot carry a new request: the peer closed it, it failed, or
  // unrequested bytes wait in it. Does not block.
  bool is_stale();
  // Waits until a byte can be read; false when the deadline passed first.
  bool wait_readable(Deadline deadline);

 private:
  explicit DeadlineSocket(int fd) : fd_(fd) {}
  // Waits for `events` until the deadline; false on timeout.
  bool poll_for(short events, Deadline deadline);
  int fd_ = -1;
};

}  // namespace ddprun::rendezvous::store
