#pragma once
// Helpers for the end-to-end agent tests: real ddprun processes with their output in files,
// bounded waits on pidfds (no sleeps where an event exists), free ports, /proc checks.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ddprun::agent::e2e {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Fast rendezvous settings (--rdzv_conf), so loss detection and re-forming take about a second.
inline const std::string kFastRdzv =
    "join_timeout=30,last_call_timeout=0.5,keep_alive_interval=0.3,keep_alive_max_attempt=3,"
    "read_timeout=10";

inline std::string ddprun_binary() {
  return std::string(DDPRUN_BIN_DIR) + "/ddprun";
}

// The reference launcher: the real torchrun of the project's PyTorch 2.x (DDPRUN_TORCH_PYTHON,
// by default .venv made by scripts/install-deps.sh), and that Python for PyTorch workers.
inline std::string reference_python() {
  return DDPRUN_TORCH_PYTHON;
}
inline std::string reference_torchrun() {
  return (fs::path(DDPRUN_TORCH_PYTHON).parent_path() / "torchrun").string();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "ddprun_e2e_XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A TCP port nothing is bound to on addr right now (tests run in parallel: never a fixed port).
inline uint16_t free_port(const char* addr = "127.0.0.1") {
  // Outside the kernel's ephemeral range (32768-60999 by default): a port from that range can be
  // taken before the test binds it by any outgoing connection, including a client retrying to
  // connect to it, which Linux may connect to itself (TCP simultaneous open).
  std::random_device entropy;
  std::uniform_int_distribution<int> pick(20000, 32000);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, addr, &sa.sin_addr);
    sa.sin_port = htons(static_cast<uint16_t>(pick(entropy)));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    ::close(fd);
    if (bound)
      return ntohs(sa.sin_port);
  }
  throw std::runtime_error("no free port in 20000-32000");
}

// ddprun and its options for node `node` (127.0.0.<node>) of a 2-node c10d job whose store
// node 2 hosts at 127.0.0.2:port, with the fast rendezvous settings; the entry point follows.
inline std::vector<std::string> two_node_c10d_agent(uint16_t port, int node,
                                                    const std::string& run_id, int nproc_per_node) {
  return {ddprun_binary(),
          "--nnodes",
          "2",
          "--nproc_per_node",
          std::to_string(nproc_per_node),
          "--rdzv_backend",
          "c10d",
          "--rdzv_endpoint",
          "127.0.0.2:" + std::to_string(port),
          "--rdzv_id",
          run_id,
          "--rdzv_conf",
          kFastRdzv + (node == 2 ? ",is_host=1" : ",is_host=0"),
          "--local_addr",
          "127.0.0." + std::to_string(node)};
}

// The state letter of /proc/PID/stat (R, S, D, Z, ...): the field after the command name, which
// may itself hold blanks and parentheses; nullopt when the process is gone.
inline std::optional<char> process_state_letter(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text))
    return std::nullopt;
  const auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size())
    return std::nullopt;
  return text[close_paren + 2];
}

// Running and not a zombie.
inline bool process_running(pid_t pid) {
  const auto state = process_state_letter(pid);
  return state && *state != 'Z' && *state != 'X';
}

// Waits for every pid to exit (pidfds work for processes that are not our children).
inline bool wait_until_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (pid_t pid : pids) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0)
      continue;  // already gone
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count())));
    ::close(fd);
    if (ready <= 0 && process_running(pid))
      return false;
  }
  return true;
}

// Waits (inotify on the file's folder, bounded) until the file's text satisfies done.
template <class Predicate>
bool wait_for_file(const std::string& path, Predicate done, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ::inotify_add_watch(fd, fs::path(path).parent_path().c_str(),
                      IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO);
  bool satisfied = false;
  for (;;) {
    if (done(read_file(path))) {
      satisfied = true;
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      break;
    pollfd p{fd, POLLIN, 0};
    // Capped so a change that raced the first read is still seen.
    ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 200)));
    char buffer[4096];
    while (::read(fd, buffer, sizeof buffer) > 0) {
    }
  }
  ::close(fd);
  return satisfied;
}

// One child process with stdout and stderr in files; killed (with its group) on destruction.
class Process {
 public:
  Process(std::vector<std::string> argv, const std::string& out_path,
          std::map<std::string, std::string> env_changes = {})
      : out_path_(out_path) {
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      std::string name = entry.substr(0, entry.find('='));
      if (!env_changes.contains(name))
        env_storage.push_back(entry);
    }
    for (const auto& [name, value] : env_changes)
      env_storage.push_back(name + "=" + value);
    std::vector<char*> args, envp;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env_storage)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);  // its own group: signals to the test never reach it by accident
      ::dup2(out, 1);
      ::dup2(out, 2);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::close(out);
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  }
  ~Process() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(5));
    }
    if (pidfd_ >= 0)
      ::close(pidfd_);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // The exit status (WEXITSTATUS, or 128+signal when killed), nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds limit) {
    if (status_)
      return status_;
    pollfd fd{pidfd_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(limit.count())) <= 0)
      return std::nullopt;
    int raw = 0;
    if (::waitpid(pid_, &raw, 0) != pid_)
      return std::nullopt;
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    return status_;
  }
  std::string output() const { return read_file(out_path_); }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::string out_path_;
  std::optional<int> status_;
};

inline bool wait_for_lines(const std::string& path, std::size_t min_lines,
                           std::chrono::milliseconds limit) {
  return wait_for_file(
      path,
      [&](const std::string& text) {
        return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= min_lines;
      },
      limit);
}

// <dir>/sub/fail.sh, a worker script where local rank 1 exits 3 after handing a token through
// the FIFO `fifo` to local rank 2, which then exits 4 (two failures within moments of each
// other), and any other rank sleeps until it is stopped. Returns its path as a user might
// spell it ("sub/../sub/fail.sh"), which a failure table must repeat as given.
inline std::string write_two_failing_ranks_script(const TempDir& dir, const std::string& fifo) {
  fs::create_directories(dir / "sub");
  write_file(dir / "sub/fail.sh",
             "#!/bin/sh\n"
             "case $LOCAL_RANK in\n"
             "  1) echo x > " +
                 fifo +
                 "; exit 3;;\n"
                 // Rank 2 ignores the stop's SIGTERM: its exit 4 is its own however the stop
                 // and the hand-off interleave.
                 "  2) trap '' TERM; read x < " +
                 fifo +
                 "; exit 4;;\n"
                 "  *) exec sleep 60;;\n"
                 "esac\n");
  fs::permissions(dir / "sub/fail.sh", fs::perms::owner_all);
  return dir / "sub/../sub/fail.sh";
}

// A gate workers wait at, opened for all of them at one instant: a FIFO the test holds open for
// writing, on which each worker blocks in a shell `read`; closing it gives every reader EOF at
// once, so their next steps (an exit 3, say) start within the same moment.
class WorkerGate {
 public:
  explicit WorkerGate(const TempDir& dir) : dir_(dir.path()) {
    const std::string gate = dir_ + "/gate";
    if (::mkfifo(gate.c_str(), 0600) != 0)
      throw std::runtime_error("mkfifo " + gate + " failed");
    writer_ = ::open(gate.c_str(), O_RDWR | O_CLOEXEC);  // O_RDWR: no wait for a reader
    if (writer_ < 0)
      throw std::runtime_error("cannot open " + gate);
  }
  ~WorkerGate() { open(); }
  WorkerGate(const WorkerGate&) = delete;
  WorkerGate& operator=(const WorkerGate&) = delete;

  // Shell lines for a worker: say its pid under its global rank, then block at the gate.
  std::string wait_command() const {
    return "echo $$ > " + dir_ + "/waiting.$RANK; read x < " + dir_ + "/gate";
  }

  // Waits until the workers of these global ranks all block in their read of the gate (their
  // stdin is the gate and they sleep: nothing but the read sleeps there). No event tells a
  // process fell asleep, so /proc is looked at every few milliseconds, bounded.
  bool wait_until_all_wait(const std::vector<int>& ranks, std::chrono::milliseconds limit) const {
    const auto deadline = Clock::now() + limit;
    for (int rank : ranks) {
      const std::string pid_file = dir_ + "/waiting." + std::to_string(rank);
      const auto has_pid = [](const std::string& text) { return text.ends_with("\n"); };
      if (!wait_for_file(
              pid_file, has_pid,
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())))
        return false;
      const pid_t pid = std::stoi(read_file(pid_file));
      const std::string stdin_link = "/proc/" + std::to_string(pid) + "/fd/0";
      for (;;) {
        std::error_code ignored;
        const bool at_gate = fs::read_symlink(stdin_link, ignored) == fs::path(dir_ + "/gate");
        if (at_gate && process_state_letter(pid) == 'S')
          break;
        if (Clock::now() >= deadline)
          return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    return true;
  }

  // Every waiting worker reads EOF now.
  void open() {
    if (writer_ >= 0)
      ::close(writer_);
    writer_ = -1;
  }

 private:
  std::string dir_;
  int writer_ = -1;
};

inline std::size_t count_occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace ddprun::agent::e2e
