#pragma once
// Real ways to keep a process from ending on SIGKILL, for the tests of what the agent does with
// a worker it cannot reap. A cgroup v1 freezer puts it in D state, as a worker wedged on a GPU or
// NIC is: SIGKILL cannot end it until it is thawed. Where no freezer can be had, a ptrace tracer
// that seizes it with PTRACE_O_TRACEEXIT and never resumes it holds it at its exit stop, which
// SIGKILL cannot end either. Every hold is let go on destruction, whatever happened.

#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "agent/workers/process_state.hpp"
#include "tests/agent/e2e_support.hpp"

namespace ddprun::agent::stuck {

using namespace std::chrono_literals;
using e2e::Clock;

enum class HoldKind { kFreezer, kPtrace };

// Polls (bounded) until the process's state starts with `letter`; the kernel offers no event.
inline bool wait_for_state(pid_t pid, char letter, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const auto state = process_state(pid);
    if (state && state->front() == letter)
      return true;
    if (Clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(10ms);
  }
}

inline bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// A cgroup v1 freezer cgroup of its own, holding one process frozen. The hierarchy is the one
// mounted at /sys/fs/cgroup/freezer, else one this guard mounts on a temporary folder.
// Destruction thaws the process, moves it back to the hierarchy's root, removes the cgroup and
// unmounts what it mounted, whatever happened in between.
class FreezerHold {
 public:
  // Nothing when no freezer hierarchy can be had here.
  static std::unique_ptr<FreezerHold> make() {
    auto hold = std::unique_ptr<FreezerHold>(new FreezerHold());
    if (hold->make_cgroup("/sys/fs/cgroup/freezer"))
      return hold;
    char mount_point[] = "/tmp/ddprun_freezer_XXXXXX";
    if (::mkdtemp(mount_point) == nullptr)
      return nullptr;
    hold->mounted_ = mount_point;
    if (::mount("cgroup", mount_point, "cgroup", 0, "freezer") != 0)
      return nullptr;  // the destructor removes the folder
    if (hold->make_cgroup(mount_point))
      return hold;
    return nullptr;
  }
  ~FreezerHold() {
    if (!cgroup_.empty()) {
      write_text(cgroup_ + "/freezer.state", "THAWED");
      std::ifstream procs(cgroup_ + "/cgroup.procs");
      for (pid_t pid = 0; procs >> pid;)
        write_text(root_ + "/cgroup.procs", std::to_string(pid));
      // rmdir succeeds once the last task left; moving one is not instant everywhere.
      const auto deadline = Clock::now() + 10s;
      while (::rmdir(cgroup_.c_str()) != 0 && errno == EBUSY && Clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    }
    if (!mounted_.empty()) {
      ::umount2(mounted_.c_str(), MNT_DETACH);
      ::rmdir(mounted_.c_str());
    }
  }
  FreezerHold(const FreezerHold&) = delete;
  FreezerHold& operator=(const FreezerHold&) = delete;

  // Freezes pid; true once it sleeps in D state.
  bool hold(pid_t pid) {
    return write_text(cgroup_ + "/cgroup.procs", std::to_string(pid)) &&
           write_text(cgroup_ + "/freezer.state", "FROZEN") &&
           e2e::wait_for_file(
               cgroup_ + "/freezer.state",
               [](const std::string& text) { return text.starts_with("FROZEN"); }, 10s) &&
           wait_for_state(pid, 'D', 10s);
  }

 private:
  FreezerHold() = default;
  bool make_cgroup(const std::string& root) {
    const std::string cgroup = root + "/ddprun_stuck_worker_test_" + std::to_string(::getpid());
    if (::mkdir(cgroup.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
    if (::access((cgroup + "/freezer.state").c_str(), W_OK) != 0) {
      ::rmdir(cgroup.c_str());
      return false;
    }
    root_ = root;
    cgroup_ = cgroup;
    return true;
  }

  std::string root_;
  std::string cgroup_;
  std::string mounted_;
};

// A ptrace tracer on a thread of this process (an ancestor of the worker, as Yama's default
// scope asks) that seizes the worker with PTRACE_O_TRACEEXIT and never resumes it: once
// SIGKILLed it stops at its exit and is not reaped. The thread's end detaches it, and it dies.
// Not for a worker this process started itself: the parent's own waits would see the stops.
class PtraceHold {
 public:
  PtraceHold() {
    if (::pipe2(release_, O_CLOEXEC) != 0 || ::pipe2(seized_, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe failed");
  }
  ~PtraceHold() {
    ::close(release_[1]);  // the tracer's read sees EOF and the thread ends
    if (tracer_.joinable())
      tracer_.join();
    for (int fd : {release_[0], seized_[0], seized_[1]})
      ::close(fd);
  }
  PtraceHold(const PtraceHold&) = delete;
  PtraceHold& operator=(const PtraceHold&) = delete;

  bool hold(pid_t pid) {
    tracer_ = std::thread([this, pid] {
      const char seized = ::ptrace(PTRACE_SEIZE, pid, nullptr, PTRACE_O_TRACEEXIT) == 0 ? 1 : 0;
      [[maybe_unused]] auto written = ::write(seized_[1], &seized, 1);
      char ignored;
      while (::read(release_[0], &ignored, 1) < 0 && errno == EINTR) {
      }
    });
    char seized = 0;
    return ::read(seized_[0], &seized, 1) == 1 && seized == 1;
  }

 private:
  int release_[2] = {-1, -1};
  int seized_[2] = {-1, -1};
  std::thread tracer_;
};

// Keeps one process from ending on SIGKILL, the way `kind` asks (the freezer where this machine
// has none: the ptrace tracer, said in the test's output).
class StuckHold {
 public:
  explicit StuckHold(HoldKind kind) {
    if (kind == HoldKind::kFreezer) {
      freezer_ = FreezerHold::make();
      if (!freezer_)
        WARN("no cgroup v1 freezer here: holding the worker with a ptrace tracer instead");
    }
    if (!freezer_)
      tracer_ = std::make_unique<PtraceHold>();
  }
  // True once pid is held; the test cannot go on without that.
  bool hold(pid_t pid) { return freezer_ ? freezer_->hold(pid) : tracer_->hold(pid); }
  // The state a SIGKILLed held worker shows in /proc/PID/status.
  std::string stuck_state() const { return freezer_ ? "D (disk sleep)" : "t (tracing stop)"; }

 private:
  std::unique_ptr<FreezerHold> freezer_;
  std::unique_ptr<PtraceHold> tracer_;
};

// The seconds since SIGKILL that the agent's line for abandoned worker `pid` in `state` gives;
// nothing when `output` has no such line.
inline std::optional<double> reported_abandoned(const std::string& output, pid_t pid,
                                                const std::string& state) {
  const std::regex line(R"(ddprun: worker rank \d+ \(local_rank \d+, pid )" + std::to_string(pid) +
                        R"(\) did not exit (\d+\.\d) s after SIGKILL \(state: )" +
                        std::regex_replace(state, std::regex(R"([()])"), R"(\$&)") +
                        R"(\); abandoned, the agent goes on without it\.)");
  std::smatch found;
  if (!std::regex_search(output, found, line))
    return std::nullopt;
  return std::stod(found[1].str());
}

}  // namespace ddprun::agent::stuck
