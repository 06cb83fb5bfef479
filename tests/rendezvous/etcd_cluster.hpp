#pragma once
// Test helper: a throw-away etcd cluster of 1 or 3 members on loopback, each member on its own
// address (127.0.0.1, 127.0.0.2, ...) with ports the kernel had free, its data and log in a
// folder this helper creates (mkdtemp) and removes. Members are stopped by PID (SIGTERM, then
// SIGKILL). The etcd binary is Debian's etcd-server (found on PATH, or $DDPRUN_ETCD).
//
// Readiness is awaited by polling each member's /health (on a plain-HTTP metrics listener, so
// TLS clusters are probed the same way) with a deadline. Members die with the test process
// (PR_SET_PDEATHSIG), even when it crashes.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ddprun::rendezvous::testing {

struct EtcdClusterTls {
  std::string cert_file;  // the members' certificate (must name 127.0.0.x)
  std::string key_file;
  std::string trusted_ca_file;    // CA of client certificates
  bool client_cert_auth = false;  // members demand a client certificate
};

class EtcdCluster {
 public:
  struct Options {
    int members = 1;
    std::optional<EtcdClusterTls> tls;
    std::chrono::milliseconds start_timeout{30000};
    std::vector<std::string> extra_args;  // more etcd flags, e.g. {"--auth-token-ttl", "2"}
  };

  explicit EtcdCluster(Options options) : options_(std::move(options)) {
    if (options_.members < 1 || options_.members > 9) {
      throw std::invalid_argument("EtcdCluster: 1 to 9 members");
    }
    etcd_ = find_etcd();
    std::string pattern = (std::filesystem::temp_directory_path() / "ddprun-etcd-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("EtcdCluster: mkdtemp failed");
    }
    root_ = pattern;
    std::random_device random;
    token_ = std::string("ddprun-test-") + std::to_string(random()) + std::to_string(random());
    for (int i = 0; i < options_.members; ++i) {
      Member member;
      member.name = std::string("m") + std::to_string(i);
      member.host = std::string("127.0.0.") + std::to_string(i + 1);
      member.client_port = free_port(member.host);
      member.peer_port = free_port(member.host);
      member.metrics_port = free_port(member.host);
      member.data_dir = (root_ / member.name).string();
      members_.push_back(member);
    }
    try {
      for (int i = 0; i < options_.members; ++i) {
        start(i);
      }
      for (int i = 0; i < options_.members; ++i) {
        wait_healthy(i, options_.start_timeout);
      }
    } catch (...) {
      stop_all();
      throw;
    }
  }
  explicit EtcdCluster(int members = 1)
      : EtcdCluster(Options{members, std::nullopt, std::chrono::milliseconds(30000), {}}) {}
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  ~EtcdCluster() {
    stop_all();
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:p1,127.0.0.2:p2,...", as --rdzv_endpoint.
  std::string endpoints() const {
    std::string text;
    for (int i = 0; i < size(); ++i) {
      if (i > 0) {
        text += ',';
      }
      text += endpoint(i);
    }
    return text;
  }
  std::string endpoint(int member) const {
    const auto& m = members_.at(static_cast<std::size_t>(member));
    return m.host + std::string(":") + std::to_string(m.client_port);
  }
  const std::filesystem::path& root() const { return root_; }

  // SIGKILL, then reap.
  void kill(int member) {
    auto& m = members_.at(static_cast<std::size_t>(member));
    if (m.pid > 0) {
      ::kill(m.pid, SIGKILL);
      reap(m, std::chrono::seconds(10));
    }
  }
  // Starts a killed member again with its data (it rejoins the cluster).
  void restart(int member) {
    start(member);
    wait_healthy(member, options_.start_timeout);
  }
  bool running(int member) const { return members_.at(static_cast<std::size_t>(member)).pid > 0; }

  // The member that leads the cluster now (plain-HTTP clusters), or -1 if none says so.
  int leader() const {
    for (int i = 0; i < size(); ++i) {
      const auto& m = members_[static_cast<std::size_t>(i)];
      if (m.pid <= 0) {
        continue;
      }
      const std::string reply =
          http_request("POST", m.host, m.client_port, "/v3/maintenance/status", "{}");
      const auto body = reply.find("\r\n\r\n");
      if (body == std::string::npos) {
        continue;
      }
      const auto status = nlohmann::json::parse(reply.substr(body + 4), nullptr, false);
      if (status.is_object() && status.contains("leader") && status.contains("header") &&
          status["leader"] == status["header"]["member_id"]) {
        return i;
      }
    }
    return -1;
  }

  // Turns on etcd's authentication (plain-HTTP clusters), as an operator would with etcdctl:
  // a root user, a role with read and write on every key under key_prefix, and user with
  // password holding that role. Throws when etcd refuses a step.
  void enable_auth(const std::string& user, const std::string& password,
                   const std::string& key_prefix) {
    std::string prefix_end = key_prefix;
    prefix_end.back() = static_cast<char>(prefix_end.back() + 1);
    const nlohmann::json steps[][2] = {
        {"user/add", {{"name", "root"}, {"password", token_}}},
        {"user/grant", {{"user", "root"}, {"role", "root"}}},
        {"role/add", {{"name", "ddprun-rw"}}},
        {"role/grant",
         {{"name", "ddprun-rw"},
          {"perm",
           {{"permType", "READWRITE"},
            {"key", base64(key_prefix)},
            {"range_end", base64(prefix_end)}}}}},
        {"user/add", {{"name", user}, {"password", password}}},
        {"user/grant", {{"user", user}, {"role", "ddprun-rw"}}},
        {"enable", nlohmann::json::object()},
    };
    const auto& m = members_.front();
    for (const auto& step : steps) {
      const std::string path = "/v3/auth/" + step[0].get<std::string>();
      const std::string reply = http_request("POST", m.host, m.client_port, path, step[1].dump());
      if (reply.rfind("HTTP/1.0 200", 0) != 0 && reply.rfind("HTTP/1.1 200", 0) != 0) {
        throw std::runtime_error("EtcdCluster: " + path + " failed: " + reply);
      }
    }
  }

  // How many gRPC calls of method ("Range", "Txn", ...) the member started since it started,
  // from its /metrics (the JSON gateway makes one per request it serves).
  long grpc_calls(int member, const std::string& method) const {
    const auto& m = members_.at(static_cast<std::size_t>(member));
    const std::string reply =
        http_request("GET", m.host, m.metrics_port, "/metrics", "", std::size_t{16} << 20);
    const std::string label = "grpc_method=\"" + method + "\"";
    long calls = 0;
    std::size_t line_start = 0;
    while (line_start < reply.size()) {
      auto line_end = reply.find('\n', line_start);
      if (line_end == std::string::npos) {
        line_end = reply.size();
      }
      const std::string line = reply.substr(line_start, line_end - line_start);
      if (line.rfind("grpc_server_started_total{", 0) == 0 &&
          line.find(label) != std::string::npos) {
        calls += static_cast<long>(std::stod(line.substr(line.rfind(' ') + 1)));
      }
      line_start = line_end + 1;
    }
    return calls;
  }

  // Polls the member's /health until it reports a healthy cluster (it has a leader).
  void wait_healthy(int member, std::chrono::milliseconds timeout) {
    const auto& m = members_.at(static_cast<std::size_t>(member));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (m.pid <= 0 || exited(m)) {
        throw std::runtime_error("etcd member " + m.name + " exited: " + log_tail(m));
      }
      const std::string reply = http_request("GET", m.host, m.metrics_port, "/health", "");
      if (reply.find("\"health\":\"true\"") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling with a deadline
    }
    throw std::runtime_error("etcd member " + m.name + " not healthy in time: " + log_tail(m));
  }

 private:
  struct Member {
    std::string name;
    std::string host;
    std::uint16_t client_port = 0;
    std::uint16_t peer_port = 0;
    std::uint16_t metrics_port = 0;
    std::string data_dir;
    pid_t pid = -1;
    int pidfd = -1;
  };

  static std::string find_etcd() {
    if (const char* chosen = std::getenv("DDPRUN_ETCD"); chosen != nullptr && *chosen != '\0') {
      return chosen;
    }
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const auto candidate = std::filesystem::path(dir) / "etcd";
      if (::access(candidate.c_str(), X_OK) == 0) {
        return candidate.string();
      }
    }
    throw std::runtime_error(
        "etcd not found on PATH: install Debian's etcd-server (scripts/install-deps.sh)");
  }

  static std::uint16_t free_port(const std::string& host) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ::close(fd);
      throw std::runtime_error("EtcdCluster: no free port on " + host);
    }
    ::close(fd);
    return ntohs(address.sin_port);
  }

  std::string client_scheme() const { return options_.tls ? "https" : "http"; }

  void start(int index) {
    auto& m = members_.at(static_cast<std::size_t>(index));
    std::string initial_cluster;
    for (const auto& other : members_) {
      initial_cluster += (initial_cluster.empty() ? "" : ",") + other.name + "=http://" +
                         other.host + std::string(":") + std::to_string(other.peer_port);
    }
    const std::string client_url =
        client_scheme() + "://" + m.host + std::string(":") + std::to_string(m.client_port);
    const std::string peer_url =
        "http://" + m.host + std::string(":") + std::to_string(m.peer_port);
    std::vector<std::string> argv{
        etcd_,
        "--name",
        m.name,
        "--data-dir",
        m.data_dir,
        "--listen-client-urls",
        client_url,
        "--advertise-client-urls",
        client_url,
        "--listen-peer-urls",
        peer_url,
        "--initial-advertise-peer-urls",
        peer_url,
        "--listen-metrics-urls",
        "http://" + m.host + std::string(":") + std::to_string(m.metrics_port),
        "--initial-cluster",
        initial_cluster,
        "--initial-cluster-state",
        "new",
        "--initial-cluster-token",
        token_};
    argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
    if (options_.tls) {
      argv.insert(argv.end(),
                  {"--cert-file", options_.tls->cert_file, "--key-file", options_.tls->key_file,
                   "--trusted-ca-file", options_.tls->trusted_ca_file});
      if (options_.tls->client_cert_auth) {
        argv.emplace_back("--client-cert-auth");
      }
    }
    const std::string log = (root_ / (m.name + ".log")).string();
    std::vector<char*> args;
    for (auto& arg : argv) {
      args.push_back(arg.data());
    }
    args.push_back(nullptr);
    // Opened before fork: the child only calls async-signal-safe functions.
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const pid_t parent = ::getpid();
    m.pid = ::fork();
    if (m.pid == 0) {
      // A test that crashes must not leave its members running.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) {
        ::_exit(127);
      }
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
      ::execv(etcd_.c_str(), args.data());
      ::_exit(127);
    }
    ::close(null_fd);
    ::close(log_fd);
    if (m.pid < 0) {
      m.pid = -1;
      throw std::runtime_error("cannot start " + etcd_);
    }
    m.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, m.pid, 0));
  }

  static bool exited(const Member& m) {
    pollfd entry{m.pidfd, POLLIN, 0};
    return ::poll(&entry, 1, 0) > 0;
  }

  static void reap(Member& m, std::chrono::milliseconds timeout) {
    pollfd entry{m.pidfd, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(timeout.count())) > 0) {
      int status = 0;
      ::waitpid(m.pid, &status, 0);
      ::close(m.pidfd);
      m.pid = -1;
      m.pidfd = -1;
    }
  }

  void stop_all() {
    for (auto& m : members_) {
      if (m.pid > 0) {
        ::kill(m.pid, SIGTERM);
      }
    }
    for (auto& m : members_) {
      if (m.pid > 0) {
        reap(m, std::chrono::seconds(5));
      }
      if (m.pid > 0) {
        ::kill(m.pid, SIGKILL);
        reap(m, std::chrono::seconds(10));
      }
    }
  }

  std::string log_tail(const Member& m) const {
    constexpr std::size_t kTailBytes = 2000;
    const auto path = root_ / (m.name + ".log");
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error) {
      return "(no log)";
    }
    const std::size_t start = size > kTailBytes ? static_cast<std::size_t>(size) - kTailBytes : 0;
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(start));
    std::string text(static_cast<std::size_t>(size) - start, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    return text;
  }

  static std::string base64(const std::string& bytes) {
    static constexpr char kDigits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string text;
    for (std::size_t at = 0; at < bytes.size(); at += 3) {
      std::uint32_t group = static_cast<std::uint8_t>(bytes[at]) << 16;
      const std::size_t count = std::min<std::size_t>(3, bytes.size() - at);
      for (std::size_t i = 1; i < count; ++i) {
        group |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + i]))
                 << (16 - 8 * i);
      }
      for (std::size_t i = 0; i < 4; ++i) {
        text += i <= count ? kDigits[(group >> (18 - 6 * i)) & 0x3f] : '=';
      }
    }
    return text;
  }

  // A plain HTTP/1.0 request with short timeouts; the whole reply, "" on any failure.
  static std::string http_request(const std::string& method, const std::string& host,
                                  std::uint16_t port, const std::string& path,
                                  const std::string& body, std::size_t max_reply = 65536) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval timeout{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
    std::string reply;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      const std::string request = method + " " + path + " HTTP/1.0\r\nHost: " + host +
                                  "\r\nContent-Length: " + std::to_string(body.size()) +
                                  "\r\n\r\n" + body;
      if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
        char buffer[4096];
        ssize_t got = 0;
        while (reply.size() < max_reply && (got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) {
          reply.append(buffer, static_cast<std::size_t>(got));
        }
      }
    }
    ::close(fd);
    return reply;
  }

  Options options_;
  std::string etcd_;
  std::filesystem::path root_;
  std::string token_;
  std::vector<Member> members_;
};

}  // namespace ddprun::rendezvous::testing
