#pragma once
// The SET/GET/ADD mix: many connections per thread over epoll, each keeping `depth` requests
// that get a reply in flight. A connection's stream cycles through SET key + GET key (written
// together, as a PyTorch client's set() returns once sent) and ADD on a shared counter, so
// SET, GET and ADD are a third each. Measures a window after a warm-up: requests answered per
// second, latency of each answered request (queued to answered), and the CPU the server
// process and this process used in the window.

#include <netinet/in.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ddprun::bench::store {

struct MixOptions {
  sockaddr_in server{};
  pid_t server_pid = 0;  // whose CPU is measured
  int connections = 1;
  int depth = 1;    // replies outstanding per connection
  int threads = 1;  // connections are spread round-robin over them
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds duration{3000};
  std::chrono::seconds setup_limit{120};  // connecting and handshaking every connection
};

struct MixResult {
  // Requests answered in the window; a SET counts when the GET written behind it is answered.
  std::uint64_t operations = 0;
  double seconds = 0;
  double p50_us = 0;  // of the GET and ADD answered in the window
  double p99_us = 0;
  double server_cpu_seconds = 0;
  double generator_cpu_seconds = 0;
  int failed_connections = 0;  // closed by the server or broken mid-run
  std::string failure;         // set when the run could not be measured at all
};

MixResult run_mix(const MixOptions& options);

}  // namespace ddprun::bench::store
