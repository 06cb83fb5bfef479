// store_load: the load generator of bench/store. Speaks the TCPStore G2 wire protocol itself
// (no LibTorch), many non-blocking connections per thread, so that the server under test,
// not the client, is what limits the rate. One measurement per invocation, printed as one
// JSON line; bench/store/run_bench.py runs it against each server and prints the table.
//
//   store_load mix   --port P --server-pid PID [--host 127.0.0.1] [--connections 1]
//                    [--depth 1] [--threads 1] [--warmup-ms 1000] [--duration-ms 3000]
//   store_load storm --port P [--host 127.0.0.1] [--connections 1000] [--limit-s 120]
//                    [--key-prefix storm/]
//
// Exit status: 0 measured, 1 the run failed (the JSON line says why), 2 bad command line.

#include <arpa/inet.h>
#include <sys/resource.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/store/mix_load.hpp"
#include "bench/store/storm_load.hpp"

namespace {

using namespace ddprun::bench::store;

// Descriptors beyond the connections: epoll sets, standard streams, /proc reads.
constexpr rlim_t kSpareDescriptors = 64;
constexpr int kMaxConnections = 1 << 20;
constexpr int kMaxDepth = 1024;
constexpr int kMaxThreads = 256;

const char* const kUsage =
    "usage: store_load mix --port P --server-pid PID [--host ADDR] [--connections N]\n"
    "                      [--depth D] [--threads T] [--warmup-ms MS] [--duration-ms MS]\n"
    "       store_load storm --port P [--host ADDR] [--connections N] [--limit-s S]\n"
    "                        [--key-prefix TEXT]\n";

// A command-line problem, reported with the usage text and exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The options after the mode word, each given as --name VALUE, validated on access.
class CommandLine {
 public:
  explicit CommandLine(const std::vector<std::string>& args) {
    if (args.empty() || (args[0] != "mix" && args[0] != "storm")) {
      throw UsageError("the first word must be mix or storm");
    }
    mode_ = args[0];
    for (std::size_t i = 1; i < args.size(); i += 2) {
      if (args[i].rfind("--", 0) != 0 || i + 1 >= args.size()) {
        throw UsageError(args[i] + ": expected --option VALUE");
      }
      values_[args[i].substr(2)] = args[i + 1];
    }
  }

  const std::string& mode() const { return mode_; }

  // The integer value of --name within [low, high]; `fallback` when absent, or an error when
  // there is no fallback.
  long long integer(const std::string& name, std::optional<long long> fallback, long long low,
                    long long high) const {
    const auto found = values_.find(name);
    if (found == values_.end()) {
      if (!fallback) {
        throw UsageError("--" + name + " is required");
      }
      return *fallback;
    }
    long long value = 0;
    const auto& text = found->second;
    const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (status != std::errc() || end != text.data() + text.size() || value < low || value > high) {
      throw UsageError("--" + name + ": '" + text + "' is not an integer in [" +
                       std::to_string(low) + ", " + std::to_string(high) + "]");
    }
    return value;
  }

  std::string text(const std::string& name, const std::string& fallback) const {
    const auto found = values_.find(name);
    return found == values_.end() ? fallback : found->second;
  }

 private:
  std::string mode_;
  std::map<std::string, std::string> values_;
};

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      quoted += ' ';
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

// Raises the soft descriptor limit to the hard one; an error when that is still too few.
std::optional<std::string> reserve_descriptors(int connections) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  const rlim_t needed = static_cast<rlim_t>(connections) + kSpareDescriptors;
  if (limit.rlim_cur < needed) {
    return std::to_string(connections) + " connections need " + std::to_string(needed) +
           " descriptors; the hard limit (ulimit -Hn) is " + std::to_string(limit.rlim_cur);
  }
  return std::nullopt;
}

sockaddr_in server_address(const CommandLine& line) {
  sockaddr_in server{};
  server.sin_family = AF_INET;
  const std::string host = line.text("host", "127.0.0.1");
  if (::inet_pton(AF_INET, host.c_str(), &server.sin_addr) != 1) {
    throw UsageError("--host: '" + host + "' is not an IPv4 address");
  }
  server.sin_port = htons(static_cast<std::uint16_t>(line.integer("port", std::nullopt, 1, 65535)));
  return server;
}

int run_mix_command(const CommandLine& line) {
  MixOptions options;
  options.server = server_address(line);
  options.server_pid = static_cast<pid_t>(line.integer("server-pid", std::nullopt, 1, 1 << 30));
  options.connections = static_cast<int>(line.integer("connections", 1, 1, kMaxConnections));
  options.depth = static_cast<int>(line.integer("depth", 1, 1, kMaxDepth));
  options.threads = static_cast<int>(line.integer("threads", 1, 1, kMaxThreads));
  options.warmup = std::chrono::milliseconds(line.integer("warmup-ms", 1000, 0, 600'000));
  options.duration = std::chrono::milliseconds(line.integer("duration-ms", 3000, 10, 600'000));
  if (const auto shortage = reserve_descriptors(options.connections)) {
    std::printf("{\"failure\": %s}\n", json_string(*shortage).c_str());
    return 1;
  }
  const auto result = run_mix(options);
  if (!result.failure.empty()) {
    std::printf("{\"failure\": %s}\n", json_string(result.failure).c_str());
    return 1;
  }
  std::printf(
      "{\"connections\": %d, \"depth\": %d, \"threads\": %d, \"operations\": %llu, "
      "\"seconds\": %.6f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"server_cpu_seconds\": %.3f, "
      "\"generator_cpu_seconds\": %.3f, \"failed_connections\": %d}\n",
      options.connections, options.depth, options.threads,
      static_cast<unsigned long long>(result.operations), result.seconds, result.p50_us,
      result.p99_us, result.server_cpu_seconds, result.generator_cpu_seconds,
      result.failed_connections);
  return 0;
}

int run_storm_command(const CommandLine& line) {
  StormOptions options;
  options.server = server_address(line);
  options.connections = static_cast<int>(line.integer("connections", 1000, 1, kMaxConnections));
  options.limit = std::chrono::seconds(line.integer("limit-s", 120, 1, 3600));
  options.key_prefix = line.text("key-prefix", options.key_prefix);
  if (const auto shortage = reserve_descriptors(options.connections)) {
    std::printf("{\"failure\": %s}\n", json_string(*shortage).c_str());
    return 1;
  }
  const auto result = run_storm(options);
  std::printf(
      "{\"connections\": %d, \"complete\": %s, \"connected_seconds\": %.4f, "
      "\"woken_seconds\": %.4f, \"retries\": %d, \"failure\": %s}\n",
      options.connections, result.complete ? "true" : "false", result.connected_seconds,
      result.woken_seconds, result.retries, json_string(result.failure).c_str());
  return result.complete ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const CommandLine line(std::vector<std::string>(argv + 1, argv + argc));
    return line.mode() == "mix" ? run_mix_command(line) : run_storm_command(line);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "store_load: %s\n%s", error.what(), kUsage);
    return 2;
  } catch (const std::exception& error) {
    std::printf("{\"failure\": %s}\n", json_string(error.what()).c_str());
    return 1;
  }
}
