// store_bench: ddprun-store against PyTorch's own TCPStore server, both driven by LibTorch's
// c10d::TCPStore client (1.13, two connections per client). Prints one table of medians with
// the ratio ours/PyTorch. Run through bench/store/run.sh.
//
// Workloads: a SET/GET/ADD mix at 1, 16 and 256 concurrent clients (ops/s, p50/p99 latency
// per operation; GET is the client's WAIT+GET); and a connection storm: K clients connect,
// each ADDs a counter, the last one SETs a key everybody WAITs on. Storm clients run in
// worker processes of at most 1000 threads, each connecting to a fresh server.

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void raise_descriptor_limit() {
  const rlimit raised{1 << 20, 1 << 20};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// Clients share this machine with the server under test: run them at nice 10 (Linux nice is
// per thread), so that thousands of runnable client threads do not starve either server's
// event loop, as they would not when the clients are on other machines.
void lower_client_priority() {
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
}

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A child process with stdout on a pipe; killed (SIGTERM, then SIGKILL) when destroyed.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    int input[2];
    if (::pipe2(input, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_adddup2(&actions, input[0], STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    const int spawned =
        posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    ::close(input[0]);
    out_ = fds[0];
    in_ = input[1];
    if (spawned != 0) {
      throw std::runtime_error("cannot start " + argv[0]);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (!reaped_) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 100 && !try_reap(); ++i) {
        std::this_thread::sleep_for(20ms);
      }
      if (!reaped_) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    ::close(out_);
    ::close(in_);
  }
  // Writes to the child's standard input.
  void send(const std::string& text) {
    [[maybe_unused]] const auto written = ::write(in_, text.data(), text.size());
  }
  pid_t pid() const { return pid_; }
  std::optional<std::string> read_line(Clock::time_point deadline) {
    while (true) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd entry{out_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&entry, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      char chunk[1024];
      const ssize_t got = ::read(out_, chunk, sizeof(chunk));
      if (got <= 0) {
        return std::nullopt;
      }
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

 private:
  bool try_reap() {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      reaped_ = true;
    }
    return reaped_;
  }
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
  bool reaped_ = false;
  std::string buffer_;
};

struct Server {
  std::unique_ptr<Child> process;
  std::uint16_t port = 0;
};

Server start_server(const std::string& kind, const std::string& store_binary,
                    const std::string& torch_binary) {
  Server server;
  if (kind == "ddprun") {
    server.process = std::make_unique<Child>(std::vector<std::string>{
        store_binary, "--host", "0.0.0.0", "--port", "0", "--log-level", "error"});
  } else {
    server.process = std::make_unique<Child>(std::vector<std::string>{torch_binary, "0"});
  }
  const auto line = server.process->read_line(Clock::now() + 30s);
  if (!line || line->find(':') == std::string::npos) {
    throw std::runtime_error(kind + " server did not print its address");
  }
  server.port = static_cast<std::uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  return server;
}

c10d::TCPStoreOptions client_options(std::uint16_t port) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = 300s;
  return options;
}

std::vector<std::uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

// CPU seconds (user + system) a process has used so far, from /proc.
double cpu_seconds(pid_t pid) {
  std::FILE* file = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (file == nullptr) {
    return 0;
  }
  char text[2048] = {};
  const std::size_t got = std::fread(text, 1, sizeof(text) - 1, file);
  std::fclose(file);
  std::string stat(text, got);
  // Fields after the ")" that ends the command name: state is field 3, utime 14, stime 15.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double utime = 0;
  double stime = 0;
  for (int index = 3; fields >> field; ++index) {
    if (index == 14) {
      utime = std::stod(field);
    } else if (index == 15) {
      stime = std::stod(field);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct MixResult {
  double ops_per_second = 0;
  double server_cpu_us_per_op = 0;
  double p50_us = 0;
  double p99_us = 0;
};

double percentile(std::vector<std::uint32_t>& samples, double fraction) {
  if (samples.empty()) {
    return 0;
  }
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(index),
                   samples.end());
  return samples[index];
}

// clients threads, each with its own c10d::TCPStore, run the SET/GET/ADD mix for `duration`.
MixResult run_mix(std::uint16_t port, pid_t server_pid, int clients,
                  std::chrono::milliseconds duration) {
  std::vector<std::unique_ptr<c10d::TCPStore>> stores;
  for (int i = 0; i < clients; ++i) {
    stores.push_back(std::make_unique<c10d::TCPStore>("127.0.0.1", client_options(port)));
  }
  std::latch ready(clients + 1);
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::uint32_t>> latencies(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      lower_client_priority();
      auto& store = *stores[static_cast<std::size_t>(t)];
      auto& samples = latencies[static_cast<std::size_t>(t)];
      samples.reserve(1 << 16);
      const auto value = bytes(std::string(64, 'v'));
      ready.arrive_and_wait();
      for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const std::string key = "mix/" + std::to_string(t) + "/" + std::to_string(i % 64);
        const auto started = Clock::now();
        switch (i % 3) {
          case 0:
            store.set(key, value);
            break;
          case 1:
            store.get("mix/" + std::to_string(t) + "/" + std::to_string((i - 1) % 64));
            break;
          default:
            store.add("mix/counter", 1);
            break;
        }
        samples.push_back(static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count()));
      }
    });
  }
  ready.arrive_and_wait();
  const auto started = Clock::now();
  const double cpu_before = cpu_seconds(server_pid);
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& thread : threads) {
    thread.join();
  }
  const double server_cpu = cpu_seconds(server_pid) - cpu_before;
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  std::vector<std::uint32_t> all;
  for (auto& samples : latencies) {
    all.insert(all.end(), samples.begin(), samples.end());
  }
  MixResult result;
  result.ops_per_second = static_cast<double>(all.size()) / elapsed;
  result.server_cpu_us_per_op =
      all.empty() ? 0 : server_cpu * 1e6 / static_cast<double>(all.size());
  result.p50_us = percentile(all, 0.50);
  result.p99_us = percentile(all, 0.99);
  return result;
}

// Storm worker process: `local` threads, each one client of the storm.
int storm_worker(const std::string& host, std::uint16_t port, std::int64_t total, int local) {
  raise_descriptor_limit();
  lower_client_priority();  // inherited by every thread created below
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex error_mutex;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 256 * 1024);
  // Every thread exists before the storm starts: the parent says go (a byte on stdin)
  // once all workers are ready, so process start-up and LibTorch loading are not timed.
  std::latch go(1);
  // When the last client's WAIT returned (client teardown is not part of the storm).
  std::atomic<std::int64_t> last_woken{0};
  struct Job {
    std::string host;
    std::uint16_t port;
    std::int64_t total;
    std::atomic<int>* failures;
    std::string* first_error;
    std::mutex* error_mutex;
    std::latch* go;
    std::atomic<std::int64_t>* last_woken_ns;
  } job{host, port, total, &failures, &first_error, &error_mutex, &go, &last_woken};
  auto body = [](void* raw) -> void* {
    auto* j = static_cast<Job*>(raw);
    j->go->wait();
    try {
      c10d::TCPStore store(j->host, client_options(j->port));
      if (store.add("storm/count", 1) == j->total) {
        store.set("storm/go", bytes("1"));
      }
      store.wait({"storm/go"});
      const std::int64_t now = wall_ns();
      std::int64_t seen = j->last_woken_ns->load();
      while (now > seen && !j->last_woken_ns->compare_exchange_weak(seen, now)) {
      }
    } catch (const std::exception& error) {
      if (j->failures->fetch_add(1) == 0) {
        const std::lock_guard<std::mutex> lock(*j->error_mutex);
        *j->first_error = error.what();
      }
    }
    return nullptr;
  };
  std::vector<pthread_t> threads;
  for (int i = 0; i < local; ++i) {
    pthread_t thread;
    if (pthread_create(&thread, &attributes, body, &job) != 0) {
      failures.fetch_add(1);
      continue;
    }
    threads.push_back(thread);
  }
  std::cout << "ready" << std::endl;
  char byte = 0;
  [[maybe_unused]] const auto got = ::read(STDIN_FILENO, &byte, 1);
  go.count_down();
  for (const auto thread : threads) {
    pthread_join(thread, nullptr);
  }
  std::string error = first_error.substr(0, first_error.find('\n'));
  std::cout << "done " << last_woken.load() << " " << failures.load() << " " << error << std::endl;
  return 0;
}

struct StormResult {
  bool ok = false;
  double seconds = 0;
  std::string failure;
};

StormResult run_storm(const std::string& self, std::uint16_t port, const std::string& host,
                      int clients, std::chrono::seconds limit) {
  const int per_worker = 1000;
  const int workers = (clients + per_worker - 1) / per_worker;
  std::vector<std::unique_ptr<Child>> children;
  for (int w = 0; w < workers; ++w) {
    const int local = std::min(per_worker, clients - w * per_worker);
    children.push_back(std::make_unique<Child>(
        std::vector<std::string>{self, "--storm-worker", host, std::to_string(port),
                                 std::to_string(clients), std::to_string(local)}));
  }
  StormResult result;
  for (auto& child : children) {
    if (child->read_line(Clock::now() + 120s) != std::optional<std::string>("ready")) {
      result.failure = "a storm worker did not start";
      return result;
    }
  }
  const auto started_ns = wall_ns();
  const auto deadline = Clock::now() + limit;
  for (auto& child : children) {
    child->send("g");
  }
  std::int64_t last_ns = started_ns;
  int failures = 0;
  for (auto& child : children) {
    const auto line = child->read_line(deadline);
    if (!line) {
      result.failure = "timeout after " + std::to_string(limit.count()) + " s";
      return result;
    }
    std::istringstream words(*line);
    std::string tag;
    std::int64_t end_ns = 0;
    int failed = 0;
    words >> tag >> end_ns >> failed;
    std::string error;
    std::getline(words, error);
    last_ns = std::max(last_ns, end_ns);
    failures += failed;
    if (failed > 0 && result.failure.empty()) {
      result.failure = std::to_string(failed) + " clients failed:" + error.substr(0, 60);
    }
  }
  if (failures > 0) {
    result.failure = std::to_string(failures) + " failed" +
                     (result.failure.empty() ? "" : " (" + result.failure + ")");
    return result;
  }
  result.ok = true;
  result.seconds = static_cast<double>(last_ns - started_ns) / 1e9;
  return result;
}

std::string fixed(double value, int digits = 0) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 5 && args[0] == "--storm-worker") {
    return storm_worker(args[1], static_cast<std::uint16_t>(std::stoi(args[2])),
                        std::stoll(args[3]), std::stoi(args[4]));
  }
  if (args.size() == 4 && args[0] == "--mix-against") {
    // Diagnostics: the mix against a server that is already running (port, clients, seconds).
    const auto result = run_mix(static_cast<std::uint16_t>(std::stoi(args[1])), getpid(),
                                std::stoi(args[2]), std::chrono::seconds(std::stoi(args[3])));
    std::printf("%.0f op/s p50 %.0f us p99 %.0f us\n", result.ops_per_second, result.p50_us,
                result.p99_us);
    return 0;
  }
  std::string store_binary;
  std::string torch_binary;
  int seconds = 2;
  int repetitions = 3;
  std::vector<int> mix_clients{1, 16, 256};
  std::vector<int> storm_clients{1000, 4000, 10000};
  int storm_limit = 180;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--store") {
      store_binary = args[i + 1];
    } else if (args[i] == "--torch-server") {
      torch_binary = args[i + 1];
    } else if (args[i] == "--seconds") {
      seconds = std::stoi(args[i + 1]);
    } else if (args[i] == "--repetitions") {
      repetitions = std::stoi(args[i + 1]);
    } else if (args[i] == "--storm-limit") {
      storm_limit = std::stoi(args[i + 1]);
    } else if (args[i] == "--clients") {
      mix_clients.clear();
      std::istringstream list(args[i + 1]);
      for (std::string item; std::getline(list, item, ',');) {
        mix_clients.push_back(std::stoi(item));
      }
    } else if (args[i] == "--storms") {
      storm_clients.clear();
      std::istringstream list(args[i + 1]);
      for (std::string item; std::getline(list, item, ',');) {
        if (item != "none") {
          storm_clients.push_back(std::stoi(item));
        }
      }
    }
  }
  if (store_binary.empty() || torch_binary.empty()) {
    std::cerr << "usage: store_bench --store PATH --torch-server PATH [--seconds N] "
                 "[--repetitions N] [--clients 1,16,256] [--storms 1000,4000,10000|none] "
                 "[--storm-limit S]\n";
    return 2;
  }
  raise_descriptor_limit();
  std::signal(SIGPIPE, SIG_IGN);
  const std::string self = "/proc/self/exe";
  char resolved[4096];
  const ssize_t length = ::readlink(self.c_str(), resolved, sizeof(resolved) - 1);
  const std::string self_path =
      length > 0 ? std::string(resolved, static_cast<std::size_t>(length)) : argv[0];

  std::printf(
      "store_bench: LibTorch c10d::TCPStore client (1.13) against ddprun-store and "
      "PyTorch's TCPStore server;\nmix = SET/GET/ADD round robin, %d s x %d runs "
      "(median); latency per op in microseconds; client threads at nice 10\n\n",
      seconds, repetitions);
  std::printf("%-22s %14s %14s %8s %18s %18s %16s\n", "workload", "ddprun", "pytorch", "ratio",
              "ddprun p50/p99", "pytorch p50/p99", "server CPU/op");
  for (const int clients : mix_clients) {
    MixResult results[2];
    const char* kinds[2] = {"ddprun", "pytorch"};
    for (int k = 0; k < 2; ++k) {
      const auto server = start_server(kinds[k], store_binary, torch_binary);
      std::vector<double> rates, cpus, p50s, p99s;
      for (int r = 0; r < repetitions; ++r) {
        const auto result =
            run_mix(server.port, server.process->pid(), clients, std::chrono::seconds(seconds));
        rates.push_back(result.ops_per_second);
        cpus.push_back(result.server_cpu_us_per_op);
        p50s.push_back(result.p50_us);
        p99s.push_back(result.p99_us);
      }
      results[k] = {median(rates), median(cpus), median(p50s), median(p99s)};
    }
    std::printf("%-22s %10s op/s %9s op/s %7sx %18s %18s %6s/%-6s us\n",
                ("mix, " + std::to_string(clients) + " clients").c_str(),
                fixed(results[0].ops_per_second).c_str(), fixed(results[1].ops_per_second).c_str(),
                fixed(results[0].ops_per_second / results[1].ops_per_second, 2).c_str(),
                (fixed(results[0].p50_us) + " / " + fixed(results[0].p99_us)).c_str(),
                (fixed(results[1].p50_us) + " / " + fixed(results[1].p99_us)).c_str(),
                fixed(results[0].server_cpu_us_per_op, 1).c_str(),
                fixed(results[1].server_cpu_us_per_op, 1).c_str());
    std::fflush(stdout);
  }
  int address = 10;
  for (const int clients : storm_clients) {
    StormResult results[2];
    const char* kinds[2] = {"ddprun", "pytorch"};
    for (int k = 0; k < 2; ++k) {
      const auto server = start_server(kinds[k], store_binary, torch_binary);
      // A fresh loopback destination per storm, so earlier storms' TIME_WAIT ports do not count.
      const std::string host = "127.0.0." + std::to_string(address++);
      results[k] =
          run_storm(self_path, server.port, host, clients, std::chrono::seconds(storm_limit));
    }
    const auto show = [](const StormResult& r) {
      return r.ok ? fixed(r.seconds, 2) + " s" : std::string("FAILED");
    };
    std::printf("%-22s %14s %14s %8s   %s\n",
                ("storm, " + std::to_string(clients) + " clients").c_str(),
                show(results[0]).c_str(), show(results[1]).c_str(),
                results[0].ok && results[1].ok
                    ? (fixed(results[1].seconds / results[0].seconds, 2) + "x").c_str()
                    : "-",
                (results[0].ok ? std::string() : "ddprun: " + results[0].failure + " ")
                    .append(results[1].ok ? "" : "pytorch: " + results[1].failure)
                    .c_str());
    std::fflush(stdout);
  }
  std::printf(
      "\nratio: ops/s ours/PyTorch for the mix; time PyTorch/ours for storms (>1: ours faster)\n");
  return 0;
}
