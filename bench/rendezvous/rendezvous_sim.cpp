// The rendezvous at scale, on one machine: N headless agents (the real round machine, driver
// and StoreKv backend; no worker processes) on one event loop in this process, against one
// real ddprun-store process. Per N it measures, with medians over --repeats:
//   form     from every agent's start to every agent running the round;
//   leave    from one agent stopped by SIGTERM to the N-1 others running the next round;
//   crash    from one agent SIGKILLed (its connections just close) to the others running the
//            next round; this includes the heartbeat loss threshold (keep_alive_interval x
//            keep_alive_max_attempt), printed beside it.
// With --etcd ENDPOINTS the agents use the etcd backend against that cluster instead (each
// simulation under a run id of its own); a crashed agent's lease then expires after its TTL.
// With --secret-compare the store has a job secret (every agent connection proves it with
// HMAC-SHA256 over the store's challenge) and each N runs open and with the secret, alternating,
// with the ratio of their medians (form and re-form after a leave; no crash).
// Usage: rendezvous_sim [--etcd ENDPOINTS] [--agents 1024,4096,16384]
//        [--repeats 3] [--no-crash] [--form-only] [--secret-compare]
// (--form-only: only the first formation, e.g. to count a backend's requests per join)

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "agent/node/headless_agent.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"
#include "rendezvous/store/descriptor_limit.hpp"
#include "tests/rendezvous/child_process.hpp"

namespace {

using namespace ddprun;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr double kKeepAliveS = 2;
constexpr int kKeepAliveAttempts = 2;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Where the agents meet: a ddprun-store this process started, or an etcd cluster.
struct Meeting {
  uint16_t store_port = 0;
  std::string etcd_endpoints;  // non-empty: the etcd backend
  std::string run_id = "sim";
  std::string secret;  // non-empty: the store's job secret, which every agent proves
};

constexpr const char* kSimSecret = "rendezvous-sim-job-secret-0123456789abcdef";

// The secret for ddprun-store --secret-file: a file only its owner may read (mkstemp's 0600).
class SecretFile {
 public:
  explicit SecretFile(const std::string& secret) {
    std::string templ = "/tmp/ddprun-sim-secret-XXXXXX";
    const int fd = ::mkstemp(templ.data());
    if (fd < 0 || ::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size()))
      throw std::runtime_error("cannot write a secret file in /tmp");
    ::close(fd);
    path_ = templ;
  }
  ~SecretFile() { ::unlink(path_.c_str()); }
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

agent::RendezvousConfig agent_config(const Meeting& meeting, int nodes, int index) {
  agent::RendezvousConfig c;
  c.backend = agent::RendezvousBackend::c10d;
  c.host = "127.0.0.1";
  c.port = meeting.store_port;
  c.run_id = meeting.run_id;
  c.secret = meeting.secret;
  const std::map<std::string, std::string> conf = {
      {"is_host", "0"},
      {"join_timeout", "300"},
      {"last_call_timeout", "5"},
      {"close_timeout", "120"},
      {"read_timeout", "120"},
      {"keep_alive_interval", std::to_string(kKeepAliveS)},
      {"keep_alive_max_attempt", std::to_string(kKeepAliveAttempts)}};
  c.settings = rendezvous::round::parse_rdzv_settings(conf);
  if (!meeting.etcd_endpoints.empty()) {
    c.backend = agent::RendezvousBackend::etcd;
    c.etcd =
        rendezvous::backends::etcd::etcd_options_from_command_line(meeting.etcd_endpoints, conf);
  }
  char name[32];
  std::snprintf(name, sizeof name, "sim-%06d", index);
  c.local_addr = name;
  // MIN two below MAX: after a leave and a crash the survivors re-form without a replacement.
  c.min_nodes = std::max(1, nodes - 2);
  c.max_nodes = nodes;
  c.shape.nproc_per_node = 8;
  return c;
}

struct Sample {
  double form_s = 0;
  double leave_s = 0;
  double crash_s = 0;
};

class Simulation {
 public:
  Simulation(const std::string& etcd_endpoints, int nodes, bool secret = false) : nodes_(nodes) {
    Meeting meeting;
    if (etcd_endpoints.empty()) {
      // The ddprun-store built beside this program, as the tests start it.
      if (secret) {
        secret_file_.emplace(kSimSecret);
        meeting.secret = kSimSecret;
        store_.emplace(std::vector<std::string>{"--secret-file", secret_file_->path()});
      } else {
        store_.emplace();
      }
      meeting.store_port = store_->port;
    } else {
      // Keys of earlier simulations stay in etcd: a fresh run id keeps them apart.
      meeting.etcd_endpoints = etcd_endpoints;
      meeting.run_id = "sim-" + std::to_string(std::random_device{}());
    }
    agents_.reserve(static_cast<std::size_t>(nodes));
    for (int i = 0; i < nodes; ++i) {
      agents_.push_back(
          std::make_unique<agent::HeadlessAgent>(io_, agent_config(meeting, nodes, i)));
    }
  }
  ~Simulation() {
    for (auto& a : agents_) {
      a->crash();
    }
    for (auto& a : retired_) {
      a->crash();
    }
  }

  Sample run(bool crash, bool leave = true) {
    Sample sample;
    const auto start = Clock::now();
    for (auto& a : agents_) {
      a->begin();
    }
    wait_for_round(1, nodes_, "forming");
    sample.form_s = seconds_since(start);
    if (!leave) {
      return sample;
    }

    const auto left_at = Clock::now();
    // Kept alive (its leave is asynchronous) but no longer part of the job.
    retired_.push_back(std::move(agents_.back()));
    agents_.pop_back();
    retired_.back()->signal(SIGTERM);
    wait_for_round(2, nodes_ - 1, "re-forming after a leave");
    sample.leave_s = seconds_since(left_at);

    if (crash) {
      const auto killed = Clock::now();
      agents_.back()->crash();
      agents_.pop_back();
      wait_for_round(3, nodes_ - 2, "re-forming after a crash");
      sample.crash_s = seconds_since(killed);
    }
    return sample;
  }

 private:
  void wait_for_round(std::size_t rounds, int expected_size, const char* what) {
    const auto deadline = Clock::now() + 600s;
    for (;;) {
      const bool done = std::all_of(agents_.begin(), agents_.end(), [&](const auto& a) {
        return a->running() && a->rounds().size() >= rounds &&
               a->round()->group_world_size == expected_size;
      });
      if (done) {
        return;
      }
      for (const auto& a : agents_) {
        if (a->finish()) {
          throw std::runtime_error(std::string(what) + ": agent " + a->name() +
                                   " ended: " + a->finish()->reason);
        }
      }
      if (Clock::now() > deadline) {
        throw std::runtime_error(std::string(what) + " took over 600 s");
      }
      io_.restart();
      io_.run_for(5ms);
    }
  }

  std::optional<SecretFile> secret_file_;
  std::optional<rendezvous::store::testing::StoreDaemon> store_;
  int nodes_;
  boost::asio::io_context io_;
  std::vector<std::unique_ptr<agent::HeadlessAgent>> agents_;
  std::vector<std::unique_ptr<agent::HeadlessAgent>> retired_;
};

// Each agent holds about two store connections (the main one and a wait), and the store the
// other end of each: both processes need that many descriptors, and the agents as many
// ephemeral ports towards the store's one port.
constexpr rlim_t kConnectionsPerAgent = 2;
constexpr rlim_t kSpareDescriptors = 256;

std::optional<std::string> ephemeral_port_shortage(rlim_t needed) {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  rlim_t low = 0;
  rlim_t high = 0;
  if (!(file >> low >> high) || high < low || high - low + 1 >= needed) {
    return std::nullopt;
  }
  return "needs about " + std::to_string(needed) + " ephemeral ports to one store port, but " +
         "net.ipv4.ip_local_port_range is " + std::to_string(low) + "-" + std::to_string(high) +
         " (" + std::to_string(high - low + 1) + ")";
}

// Why n agents cannot run here, or nullopt.
std::optional<std::string> shortage_for(int n, const rendezvous::store::DescriptorLimit& limit) {
  const rlim_t connections = static_cast<rlim_t>(n) * kConnectionsPerAgent;
  if (auto descriptors =
          rendezvous::store::descriptor_shortage(limit, connections + kSpareDescriptors)) {
    return descriptors;
  }
  return ephemeral_port_shortage(connections);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    out.push_back(std::stoi(item));
  }
  return out;
}

}  // namespace

// Each N open and with a secret, alternating, so both meet the same machine load.
void compare_secret(const std::vector<int>& sizes, int repeats,
                    const rendezvous::store::DescriptorLimit& limit) {
  std::printf(
      "| agents | form open (s) | form with secret (s) | ratio | re-form open (s) | "
      "re-form with secret (s) | ratio |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int n : sizes) {
    if (const auto shortage = shortage_for(n, limit)) {
      std::printf("| %d | NOT RUN: %s | | | | | |\n", n, shortage->c_str());
      std::fflush(stdout);
      continue;
    }
    std::vector<double> form[2], leave[2];
    try {
      for (int r = 0; r < repeats; ++r) {
        for (int with_secret = 0; with_secret < 2; ++with_secret) {
          Simulation sim("", n, with_secret == 1);
          const Sample s = sim.run(false);
          form[with_secret].push_back(s.form_s);
          leave[with_secret].push_back(s.leave_s);
        }
      }
    } catch (const std::exception& error) {
      std::printf("| %d | FAILED: %s | | | | | |\n", n, error.what());
      std::fflush(stdout);
      continue;
    }
    const double f0 = median(form[0]), f1 = median(form[1]);
    const double l0 = median(leave[0]), l1 = median(leave[1]);
    std::printf("| %d | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", n, f0, f1, f1 / f0, l0, l1,
                l1 / l0);
    std::fflush(stdout);
  }
}

int main(int argc, char** argv) {
  std::string etcd;
  std::vector<int> sizes = {256, 1024, 4096, 16384};
  int repeats = 3;
  bool crash = true;
  bool leave = true;
  bool secret_compare = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--etcd" && i + 1 < argc) {
      etcd = argv[++i];
    } else if (arg == "--agents" && i + 1 < argc) {
      sizes = parse_list(argv[++i]);
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else if (arg == "--no-crash") {
      crash = false;
    } else if (arg == "--form-only") {
      crash = false;
      leave = false;
    } else if (arg == "--secret-compare") {
      secret_compare = true;
    } else {
      std::cerr << "usage: rendezvous_sim [--etcd ENDPOINTS] [--agents N,N,...] "
                   "[--repeats R] [--no-crash] [--form-only] [--secret-compare]\n";
      return 2;
    }
  }
  if (sizes.empty()) {
    std::cerr << "rendezvous_sim: --agents needs at least one size\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // The store daemon this process starts inherits the raised limit (and raises its own too).
  const rlim_t most = static_cast<rlim_t>(*std::max_element(sizes.begin(), sizes.end()));
  const auto limit =
      rendezvous::store::raise_descriptor_limit(most * kConnectionsPerAgent + kSpareDescriptors);
  std::printf("Rendezvous scale simulator: headless agents on one event loop, %s\n",
              etcd.empty() ? "one ddprun-store" : ("etcd at " + etcd).c_str());
  std::printf("(medians of %d runs; crash includes the loss threshold of %.1f s)\n\n", repeats,
              kKeepAliveS * kKeepAliveAttempts);
  if (secret_compare) {
    if (!etcd.empty()) {
      std::cerr << "rendezvous_sim: --secret-compare is for the store (etcd has its own auth)\n";
      return 2;
    }
    compare_secret(sizes, repeats, limit);
    return 0;
  }
  std::printf("| agents | form (s) | re-form after a leave (s) | re-form after a crash (s) |\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (int n : sizes) {
    std::vector<double> form, left, killed;
    if (const auto shortage = shortage_for(n, limit)) {
      std::printf("| %d | NOT RUN: %s | | |\n", n, shortage->c_str());
      std::fflush(stdout);
      continue;
    }
    try {
      for (int r = 0; r < repeats; ++r) {
        Simulation sim(etcd, n);
        const Sample s = sim.run(crash && n >= 3, leave);
        form.push_back(s.form_s);
        left.push_back(s.leave_s);
        killed.push_back(s.crash_s);
      }
    } catch (const std::exception& error) {
      std::printf("| %d | FAILED: %s | | |\n", n, error.what());
      std::fflush(stdout);
      continue;
    }
    char left_cell[32] = "-";
    if (leave) {
      std::snprintf(left_cell, sizeof left_cell, "%.3f", median(left));
    }
    std::printf("| %d | %.3f | %s | %s |\n", n, median(form), left_cell,
                crash ? std::to_string(median(killed)).substr(0, 6).c_str() : "-");
    std::fflush(stdout);
  }
  return 0;
}
