#pragma once
// Test helper: a raw TCP connection to a store, for sending hand-made bytes and checking
// the exact bytes that come back. Every read is bounded by a deadline.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/store/deadline_socket.hpp"

namespace ddprun::rendezvous::store::testing {

// "00 03 2f" -> bytes; spaces and newlines are ignored.
inline std::string hex(const std::string& text) {
  std::string bytes;
  std::string digits;
  for (char c : text) {
    if (c == ' ' || c == '\n') {
      continue;
    }
    digits.push_back(c);
    if (digits.size() == 2) {
      bytes.push_back(static_cast<char>(std::stoi(digits, nullptr, 16)));
      digits.clear();
    }
  }
  return bytes;
}

class RawConnection {
 public:
  explicit RawConnection(uint16_t port, const std::string& host = "127.0.0.1")
      : socket_(DeadlineSocket::connect(host, port, soon(std::chrono::seconds(5)))) {}

  void send(const std::string& bytes) { socket_.send_all(bytes, soon(std::chrono::seconds(5))); }

  std::string receive(std::size_t size,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::string bytes(size, '\0');
    socket_.receive_exact(bytes.data(), size, soon(timeout));
    return bytes;
  }

  // True when nothing arrives within the timeout (and the connection is still open).
  bool silent_for(std::chrono::milliseconds timeout) {
    return !socket_.wait_readable(soon(timeout));
  }

  // True when the server closes the connection within the timeout.
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = soon(timeout);
    char byte = 0;
    while (socket_.wait_readable(deadline)) {
      try {
        socket_.receive_exact(&byte, 1, deadline);
      } catch (const SocketBroken&) {
        return true;
      }
    }
    return false;
  }

 private:
  static Deadline soon(std::chrono::milliseconds timeout) {
    return std::chrono::steady_clock::now() + timeout;
  }
  DeadlineSocket socket_;
};

}  // namespace ddprun::rendezvous::store::testing
