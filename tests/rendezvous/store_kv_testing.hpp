#pragma once
// What the StoreKv tests share: their event loop, and the backend's options against a store on
// loopback, with timeouts generous enough for a loaded machine.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "rendezvous/backends/store_kv/store_kv.hpp"
#include "rendezvous/store/asio.hpp"

namespace ddprun::rendezvous::testing {

// Handlers run on the test's thread until a condition holds or a deadline passes. A work guard
// keeps run_one_until() blocking while nothing is ready.
class Loop {
 public:
  // Runs handlers until done() holds; false when the deadline came first.
  bool run_until(const std::function<bool()>& done,
                 std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      io.run_one_until(deadline);
    }
    return true;
  }

  boost::asio::io_context io;

 private:
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{
      io.get_executor()};
};

inline backends::StoreKvOptions options_for(uint16_t port, const std::string& secret = {}) {
  backends::StoreKvOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = std::chrono::seconds(20);
  options.reconnect_timeout = std::chrono::seconds(2);
  options.op_timeout = std::chrono::seconds(20);
  options.secret = secret;
  return options;
}

}  // namespace ddprun::rendezvous::testing
