// The worker group with real processes: output pumping and prefixes, exit codes, gang stop
// with SIGTERM then SIGKILL, grandchildren, exec failures, and PDEATHSIG when the agent dies.
#include "agent/worker_group.hpp"

#include "agent/signal_channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using namespace ddprun::agent;
using Clock = std::chrono::steady_clock;

namespace {

WorkerLaunch shell_worker(int local_rank, const std::string& script) {
  WorkerLaunch launch;
  launch.local_rank = local_rank;
  launch.global_rank = 10 + local_rank;
  launch.argv = {"/bin/sh", "-c", script};
  launch.env = {{"PATH", "/usr/bin:/bin"}, {"LOCAL_RANK", std::to_string(local_rank)}};
  launch.console_prefix = "[w" + std::to_string(local_rank) + "]:";
  return launch;
}

// What the agent's event loop does for a group, as a plain poll(): pumps output and reaps on
// SIGCHLD, for up to `limit` or until something happened.
void pump(WorkerGroup& group, SignalChannel& signals, std::chrono::milliseconds limit) {
  std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
  std::vector<OutputPump*> polled;
  for (auto& p : group.pumps()) {
    if (p.open()) {
      fds.push_back({p.fd(), POLLIN, 0});
      polled.push_back(&p);
    }
  }
  ::poll(fds.data(), fds.size(), static_cast<int>(limit.count()));
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0)
      polled[i - 1]->on_readable();
  }
  if (fds[0].revents != 0 && signals.drain().child_exited) {
    group.reap();
    group.finish_output();
  }
}

void wait_until_all_exited(WorkerGroup& group, SignalChannel& signals, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  group.reap();
  while (!group.all_exited() && Clock::now() < deadline) {
    pump(group, signals,
         std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  }
  REQUIRE(group.all_exited());
  group.finish_output();
}

// The agent's stop: the signal, SIGKILL after timeout, then wait for every exit.
void stop_group(WorkerGroup& group, SignalChannel& signals, int sig,
                std::chrono::milliseconds timeout) {
  group.signal_all(sig);
  const auto kill_at = Clock::now() + timeout;
  while (!group.all_exited() && Clock::now() < kill_at) {
    pump(group, signals, std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now()));
  }
  group.kill_all();
  wait_until_all_exited(group, signals, std::chrono::seconds(5));
}

// Alive: exists and is not a zombie (an unreaped zombie no longer runs or holds resources).
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text))
    return false;
  auto close_paren = text.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < text.size() &&
         text[close_paren + 2] != 'Z' && text[close_paren + 2] != 'X';
}

// Captures what the group writes to our stdout and stderr while fn runs.
class CapturedConsole {
 public:
  CapturedConsole() {
    for (int i = 0; i < 2; ++i) {
      REQUIRE(::pipe2(pipes_[i], O_CLOEXEC) == 0);
      ::fcntl(pipes_[i][0], F_SETFL, O_NONBLOCK);
      saved_[i] = ::dup(i + 1);
      ::dup2(pipes_[i][1], i + 1);
    }
  }
  ~CapturedConsole() { restore(); }
  void restore() {
    if (restored_)
      return;
    restored_ = true;
    for (int i = 0; i < 2; ++i) {
      ::dup2(saved_[i], i + 1);
      ::close(saved_[i]);
      ::close(pipes_[i][1]);
      char buffer[65536];
      for (ssize_t n; (n = ::read(pipes_[i][0], buffer, sizeof buffer)) > 0;) {
        text_[i].append(buffer, static_cast<std::size_t>(n));
      }
      ::close(pipes_[i][0]);
    }
  }
  const std::string& out() const { return text_[0]; }
  const std::string& err() const { return text_[1]; }

 private:
  int pipes_[2][2]{};
  int saved_[2]{};
  std::string text_[2];
  bool restored_ = false;
};

}  // namespace

TEST_CASE("worker output reaches the console prefixed, line by line, and tee files raw") {
  SignalChannel signals({SIGTERM});
  char dir_template[] = "/tmp/ddprun_wg_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  WorkerLaunch teed = shell_worker(1, "printf 'a'; sleep 0.05; printf 'b\\nc\\n'; printf tail");
  teed.logs.out.file = dir + "/out1.log";
  WorkerLaunch quiet = shell_worker(0, "echo hidden; echo visible-err >&2");
  quiet.logs.out.to_console = false;  // --local_ranks_filter excluded this stream
  CapturedConsole console;
  {
    WorkerGroup group({quiet, teed}, signals.original_mask());
    wait_until_all_exited(group, signals, std::chrono::seconds(10));
    CHECK(group.state() == GroupState::kSucceeded);
  }
  console.restore();
  CHECK(console.out() == "[w1]:ab\n[w1]:c\n[w1]:tail\n");
  CHECK(console.err() == "[w0]:visible-err\n");
  std::ifstream file(dir + "/out1.log");
  std::stringstream content;
  content << file.rdbuf();
  CHECK(content.str() == "ab\nc\ntail");
}

TEST_CASE("exit codes, signals and exec failures are recorded per worker") {
  SignalChannel signals({SIGTERM});
  WorkerLaunch missing = shell_worker(2, "");
  missing.argv = {"/nonexistent/worker"};
  CapturedConsole console;
  WorkerGroup group({shell_worker(0, "exit 3"), shell_worker(1, "kill -9 $$"), missing}, signals.original_mask());
  wait_until_all_exited(group, signals, std::chrono::seconds(10));
  console.restore();
  CHECK(group.state() == GroupState::kFailed);
  CHECK(group.workers()[0].exit->exit_code == 3);
  CHECK(group.workers()[1].exit->exit_code == -SIGKILL);
  CHECK(group.workers()[2].exit->exit_code == 127);
  CHECK_FALSE(group.workers()[0].stopped_by_agent);
  CHECK(console.err().find("[w2]:ddprun: cannot execute /nonexistent/worker") != std::string::npos);
}

TEST_CASE("stop: the signal first, SIGKILL after the timeout, grandchildren included") {
  SignalChannel signals({SIGTERM});
  char dir_template[] = "/tmp/ddprun_wg_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string marker = std::string(dir_template) + "/got_term";
  const std::string pid_file = std::string(dir_template) + "/grandchild";
  // Worker 0 exits cleanly on SIGTERM; worker 1 ignores it and has a grandchild.
  WorkerLaunch polite =
      shell_worker(0, "trap 'echo term > " + marker +
                          "; exit 0' TERM; echo ready; while :; do sleep 0.05; done");
  WorkerLaunch stubborn =
      shell_worker(1, "trap '' TERM; sleep 100 & echo $! > " + pid_file + ".tmp; mv " + pid_file +
                          ".tmp " + pid_file + "; echo ready; wait");
  CapturedConsole console;
  WorkerGroup group({polite, stubborn}, signals.original_mask());
  // Both have installed their traps once each printed "ready" (seen by the console pump).
  const auto ready_deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < ready_deadline && ::access(pid_file.c_str(), F_OK) != 0) {
    pump(group, signals, std::chrono::milliseconds(20));
  }
  REQUIRE(::access(pid_file.c_str(), F_OK) == 0);
  pump(group, signals, std::chrono::milliseconds(100));  // let worker 0 reach its loop
  pid_t grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  REQUIRE(grandchild > 0);
  const auto started = Clock::now();
  stop_group(group, signals, SIGTERM, std::chrono::milliseconds(500));
  const auto took = Clock::now() - started;
  console.restore();
  REQUIRE(group.all_exited());
  CHECK(group.workers()[0].exit->exit_code == 0);
  CHECK(group.workers()[1].exit->exit_code == -SIGKILL);
  CHECK(group.workers()[1].stopped_by_agent);
  CHECK(took >= std::chrono::milliseconds(450));
  CHECK(took < std::chrono::seconds(5));
  CHECK(::access(marker.c_str(), F_OK) == 0);
  const auto gone_deadline = Clock::now() + std::chrono::seconds(2);
  while (process_running(grandchild) && Clock::now() < gone_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK_FALSE(process_running(grandchild));
}

TEST_CASE("workers die with their agent even when it is SIGKILLed") {
  int report[2];
  REQUIRE(::pipe(report) == 0);
  const pid_t agent = ::fork();
  REQUIRE(agent >= 0);
  if (agent == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a failed test
    ::close(report[0]);
    SignalChannel signals({SIGTERM});
    WorkerGroup group({shell_worker(0, "exec sleep 100"), shell_worker(1, "exec sleep 100")},
                      signals.original_mask());
    for (const auto& worker : group.workers()) {
      [[maybe_unused]] auto n = ::write(report[1], &worker.pid, sizeof worker.pid);
    }
    ::close(report[1]);
    ::pause();
    ::_exit(0);
  }
  ::close(report[1]);
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() { ::kill(pid, SIGKILL); }
  } guard{agent};
  pid_t pids[2] = {0, 0};
  std::size_t got = 0;
  while (got < sizeof pids) {
    ssize_t n = ::read(report[0], reinterpret_cast<char*>(pids) + got, sizeof pids - got);
    if (n <= 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  ::close(report[0]);
  REQUIRE(got == sizeof pids);
  REQUIRE(process_running(pids[0]));
  ::kill(agent, SIGKILL);
  int status = 0;
  ::waitpid(agent, &status, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while ((process_running(pids[0]) || process_running(pids[1])) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK_FALSE(process_running(pids[0]));
  CHECK_FALSE(process_running(pids[1]));
}
