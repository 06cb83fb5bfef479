// PyTorch's own TCPStore server (c10d::TCPStore with isServer=true), alone in its process:
// prints "0.0.0.0:<port>" and serves until SIGTERM/SIGINT. The reference for store_bench.

#include <pthread.h>
#include <sys/resource.h>

#include <csignal>
#include <iostream>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

int main(int argc, char** argv) {
  // The same descriptor allowance as ddprun-store gets.
  const rlimit raised{1 << 20, 1 << 20};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(argc > 1 ? std::stoi(argv[1]) : 0);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(300);
  c10d::TCPStore store("0.0.0.0", options);
  std::cout << "0.0.0.0:" << store.getPort() << std::endl;
  int received = 0;
  sigwait(&stop_signals, &received);
  return 0;
}
