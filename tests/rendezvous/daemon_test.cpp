// ddprun-store as a process: its address line, clean stops on SIGTERM/SIGINT, clear errors
// for bad arguments, and 10,000 concurrent connections.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <sstream>

#include "child_process.hpp"
#include "raw_connection.hpp"
#include "secret_file.hpp"
#include "tests/rendezvous/store_client.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::ChildProcess;
using ddprun::rendezvous::store::testing::hex;
using ddprun::rendezvous::store::testing::SecretFile;
using ddprun::rendezvous::store::testing::StoreDaemon;
using namespace std::chrono_literals;

namespace {

const std::string kStore = std::string(DDPRUN_BIN_DIR) + "/ddprun-store";

bool send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly n bytes; the socket has SO_RCVTIMEO set, so this cannot hang.
std::string receive(int fd, std::size_t n) {
  std::string bytes(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, bytes.data() + got, n - got, 0);
    if (r <= 0) {
      return {};
    }
    got += static_cast<std::size_t>(r);
  }
  return bytes;
}

}  // namespace

TEST_CASE("ddprun-store prints its address, serves, and stops on SIGTERM and SIGINT",
          "[integration]") {
  const int stop_signal = GENERATE(SIGTERM, SIGINT);
  StoreDaemon daemon;
  StoreClientOptions options;
  options.port = daemon.port;
  options.connect_timeout = 5s;
  const auto client = StoreClient::connect(options);
  client->set("k", "v");
  CHECK(client->get("k") == "v");
  daemon.process.signal(stop_signal);
  CHECK(daemon.process.exit_code(10s) == 0);
}

TEST_CASE("ddprun-store rejects bad arguments with a message and exit code 2", "[integration]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--port", "70000"}, {"--bogus"}, {"--log-level", "loud"}, {"--max-connections"}}) {
    std::vector<std::string> argv{kStore};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess process(argv);
    CHECK(process.exit_code(10s) == 2);
  }
  ChildProcess help({kStore, "--help"});
  CHECK(help.read_line(10s).value_or("").rfind("ddprun-store:", 0) == 0);
  CHECK(help.exit_code(10s) == 0);
  ChildProcess busy({kStore, "--host", "203.0.113.1", "--port", "1"});  // not our address
  CHECK(busy.exit_code(10s) == 1);
}

// Everything ddprun-store says, both streams, from a shell that first lowers the descriptor
// limit to 512 (soft and hard, so the store cannot raise it).
std::vector<std::string> lines_under_512_descriptors(const std::string& options) {
  ChildProcess store({"/bin/sh", "-c",
                      "ulimit -n 512 && exec " + kStore +
                          " --host 127.0.0.1 --port 0 --log-level info " + options + " 2>&1"});
  std::vector<std::string> lines;
  while (auto line = store.read_line(10s)) {
    lines.push_back(*line);
    if (lines.size() == 1) {
      store.signal(SIGTERM);  // it is up: stop it, and read what it said until then
    }
  }
  CHECK(store.exit_code(10s) == 0);
  return lines;
}

TEST_CASE("ddprun-store's default connection limit fits the descriptor limit", "[integration]") {
  SECTION("the default shrinks to fit, with a note after the address; no warning") {
    const auto lines = lines_under_512_descriptors("");
    REQUIRE(lines.size() >= 2);
    CHECK(lines[0].rfind("127.0.0.1:", 0) == 0);
    CHECK(lines[1].find("at most 448 connections") != std::string::npos);
    for (const auto& line : lines) {
      CHECK(line.find("warning") == std::string::npos);
    }
  }
  SECTION("a limit asked for that cannot be honoured: a warning, after the address") {
    const auto lines = lines_under_512_descriptors("--max-connections 100000");
    REQUIRE(lines.size() >= 2);
    CHECK(lines[0].rfind("127.0.0.1:", 0) == 0);
    CHECK(lines[1].find("warning: --max-connections 100000 needs about 100064 descriptors") !=
          std::string::npos);
  }
}

TEST_CASE("ddprun-store holds 10,000 concurrent connections", "[integration]") {
  constexpr int kClients = 10000;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  REQUIRE(limit.rlim_cur >= kClients + 100);

  StoreDaemon daemon;
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(daemon.port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> fds;
  fds.reserve(kClients);
  const timeval receive_timeout{10, 0};
  for (int i = 0; i < kClients; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    fds.push_back(fd);
    // Spread source addresses over 127.0.0.2-127.0.0.41 so ephemeral ports never run short.
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + static_cast<uint32_t>(i % 40));
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&source), sizeof(source)) == 0);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) == 0);
  }
  // Every connection ADDs to one counter (G0) and gets its own distinct answer.
  const std::string add = hex("03 02 00 00 00 00 00 00 00 2f 6e 01 00 00 00 00 00 00 00");
  int answered = 0;
  for (const int fd : fds) {
    REQUIRE(send_all(fd, add));
  }
  for (const int fd : fds) {
    answered += receive(fd, 8).size() == 8 ? 1 : 0;
  }
  CHECK(answered == kClients);
  // All of them WAIT on one key; one more client sets it; every waiter is woken.
  const std::string wait = hex("05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 67 6f");
  for (const int fd : fds) {
    REQUIRE(send_all(fd, wait));
  }
  {
    StoreClientOptions options;
    options.port = daemon.port;
    options.wire = WireGeneration::g0;
    const auto setter = StoreClient::connect(options);
    CHECK(setter->get("/n") == std::to_string(kClients));
    setter->set("/go", "1");
  }
  int woken = 0;
  for (const int fd : fds) {
    woken += receive(fd, 1) == hex("00") ? 1 : 0;
  }
  CHECK(woken == kClients);
  for (const int fd : fds) {
    ::close(fd);
  }
}

TEST_CASE("ddprun-store takes the job secret from --secret-file or the environment",
          "[integration][job_secret]") {
  const SecretFile loose("a-loose-job-secret-0123456789\n", 0644);
  ChildProcess refused({kStore, "--host", "127.0.0.1", "--secret-file", loose.path()});
  CHECK(refused.exit_code(10s) == 2);
  ChildProcess empty({kStore, "--host", "127.0.0.1"}, {"DDPRUN_RDZV_SECRET="});
  CHECK(empty.exit_code(10s) == 2);
  // 15 bytes once the trailing blanks are trimmed: too short to be a secret.
  const SecretFile weak("0123456789abcde \t\r\n", 0600);
  ChildProcess weak_file({kStore, "--host", "127.0.0.1", "--secret-file", weak.path()});
  CHECK(weak_file.exit_code(10s) == 2);
  ChildProcess weak_variable({kStore, "--host", "127.0.0.1"},
                             {"DDPRUN_RDZV_SECRET=0123456789abcde"});
  CHECK(weak_variable.exit_code(10s) == 2);
  // 16 bytes are enough.
  const SecretFile enough("0123456789abcdef\n", 0600);
  ChildProcess sixteen(
      {kStore, "--host", "127.0.0.1", "--port", "0", "--secret-file", enough.path()});
  const auto sixteen_address = sixteen.read_line(10s);
  REQUIRE(sixteen_address);
  StoreClientOptions sixteen_options;
  sixteen_options.port =
      static_cast<uint16_t>(std::stoi(sixteen_address->substr(sixteen_address->find(':') + 1)));
  sixteen_options.connect_timeout = 10s;
  sixteen_options.secret = "0123456789abcdef";
  CHECK(StoreClient::connect(sixteen_options)->add("ddprun/rdzv/job/n", 1) == 1);

  ChildProcess daemon({kStore, "--host", "127.0.0.1", "--port", "0"},
                      {"DDPRUN_RDZV_SECRET=from-the-environment"});
  const auto address = daemon.read_line(10s);
  REQUIRE(address);
  // Once read, the value is zeroed where the daemon's environment held it (readable here only
  // with CAP_SYS_PTRACE: the daemon holding a secret is not dumpable).
  std::ifstream environ_file("/proc/" + std::to_string(daemon.pid()) + "/environ");
  std::stringstream environ_text;
  environ_text << environ_file.rdbuf();
  const std::string daemon_environ = environ_text.str();
  INFO("ddprun-store's /proc/PID/environ is empty or unreadable (root reads it: CAP_SYS_PTRACE)");
  REQUIRE_FALSE(daemon_environ.empty());
  CHECK(daemon_environ.find("from-the-environment") == std::string::npos);
  StoreClientOptions options;
  options.port = static_cast<uint16_t>(std::stoi(address->substr(address->find(':') + 1)));
  options.connect_timeout = 10s;
  options.secret = "from-the-environment";
  CHECK(StoreClient::connect(options)->add("ddprun/rdzv/job/n", 1) == 1);
  options.secret = "another";
  CHECK_THROWS_AS(StoreClient::connect(options), StoreAuthRefused);
}
