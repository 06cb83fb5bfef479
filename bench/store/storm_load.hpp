#pragma once
// A connection storm, as when every rank of a job starts at once: N connections are opened
// together; each completes VALIDATE + PING (what a PyTorch client's constructor waits for),
// ADDs 1 to a counter, and WAITs on a key that the connection whose ADD returned N SETs.
// Measured from the first connect(): when every connection had its PING answered, and when
// every WAIT had returned. A connection refused or reset before its ADD was answered is
// retried after a short delay, as PyTorch's client retries with backoff.

#include <netinet/in.h>

#include <chrono>
#include <string>

namespace ddprun::bench::store {

struct StormOptions {
  sockaddr_in server{};
  int connections = 1000;
  std::chrono::seconds limit{120};
  std::string key_prefix = "storm/";  // distinct per run, so runs on one server do not mix
};

struct StormResult {
  bool complete = false;
  double connected_seconds = 0;  // until the last PING was answered
  double woken_seconds = 0;      // until the last WAIT returned
  int retries = 0;               // connections opened again after a refusal or reset
  std::string failure;           // why the storm did not complete
};

StormResult run_storm(const StormOptions& options);

}  // namespace ddprun::bench::store
