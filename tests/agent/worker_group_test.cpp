// The worker group with real processes: the stream routes (inherited, tee'd with prefixes and
// partial lines at once, files, /dev/null, duplicate filters), exit codes, failures of the same
// moment, gang stop with SIGTERM then SIGKILL, grandchildren, exec failures, CPU binding, and
// PDEATHSIG when the agent dies.
#include "agent/workers/worker_group.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "agent/loop/signal_channel.hpp"
#include "e2e_support.hpp"
#include "stuck_hold.hpp"
#include "tests/skip_test.hpp"

using namespace ddprun::agent;
using ddprun::agent::e2e::process_running;
using ddprun::agent::e2e::TempDir;  // removed with what the test wrote in it
using Clock = std::chrono::steady_clock;

namespace {

// Workers here die at once on SIGKILL; none is ever abandoned.
constexpr std::chrono::seconds kReapAfterKillLimit{60};

WorkerLaunch shell_worker(int local_rank, const std::string& script) {
  WorkerLaunch launch;
  launch.local_rank = local_rank;
  launch.global_rank = 10 + local_rank;
  launch.argv = {"/bin/sh", "-c", script};
  launch.env = {{"PATH", "/usr/bin:/bin"}, {"LOCAL_RANK", std::to_string(local_rank)}};
  launch.console_prefix = "[w" + std::to_string(local_rank) + "]:";
  return launch;
}

// What the agent's event loop does for a group, as one blocking call: pumps output and reaps
// on SIGCHLD until a worker exited or external_fd is readable, or the timeout passed.
void wait_group(WorkerGroup& group, SignalChannel& signals, int external_fd,
                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  bool something_happened = false;
  for (;;) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    if (external_fd >= 0)
      fds.push_back({external_fd, POLLIN, 0});
    const std::size_t first_pump = fds.size();
    std::vector<OutputPump*> polled;
    for (auto& pump : group.output_pumps()) {
      if (pump.open()) {
        fds.push_back({pump.fd(), POLLIN, 0});
        polled.push_back(&pump);
      }
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, left.count())));
    for (std::size_t i = first_pump; i < fds.size(); ++i) {
      if (fds[i].revents != 0)
        polled[i - first_pump]->on_readable();
    }
    if (fds[0].revents != 0 && signals.drain().child_exited) {
      group.reap();
      something_happened = true;
    }
    if (first_pump == 2 && fds[1].revents != 0)
      something_happened = true;
    if (something_happened || Clock::now() >= deadline)
      return;
  }
}

void wait_until_all_exited(WorkerGroup& group, SignalChannel& signals, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  group.reap();
  while (!group.all_reaped_or_abandoned() && Clock::now() < deadline) {
    wait_group(group, signals, -1,
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  }
  REQUIRE(group.all_reaped_or_abandoned());
}

// The agent's stop: the signal, SIGKILL after the timeout, then every exit collected.
void stop_group(WorkerGroup& group, SignalChannel& signals, int sig,
                std::chrono::milliseconds timeout) {
  group.signal_all(sig);
  const auto kill_at = Clock::now() + timeout;
  while (!group.all_reaped_or_abandoned() && Clock::now() < kill_at) {
    wait_group(group, signals, -1,
               std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now()));
  }
  group.kill_all();
  wait_until_all_exited(group, signals, std::chrono::seconds(5));
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
  // The read end of the captured stdout, to wait on; read_now() appends what it holds.
  int out_fd() const { return pipes_[0][0]; }
  void read_now() {
    char buffer[65536];
    for (ssize_t n; (n = ::read(pipes_[0][0], buffer, sizeof buffer)) > 0;) {
      text_[0].append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int pipes_[2][2]{};
  int saved_[2]{};
  std::string text_[2];
  bool restored_ = false;
};

std::string file_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

StreamPlan route(StreamRoute route, std::string file = {}) {
  StreamPlan plan;
  plan.route = route;
  plan.file = std::move(file);
  return plan;
}

// Runs the group until the captured stdout contains `text` (the console is the event waited
// on, so a worker blocked reading the FIFO `go_file` proves the text came before the rest of
// its output), then releases the worker through the FIFO. Fails after a bound.
void wait_for_console_then_release(WorkerGroup& group, SignalChannel& signals,
                                   CapturedConsole& console, const std::string& text,
                                   const std::string& go_file) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (console.out().find(text) == std::string::npos && Clock::now() < deadline) {
    wait_group(group, signals, console.out_fd(),
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    console.read_now();
  }
  INFO(console.out());
  REQUIRE(console.out().find(text) != std::string::npos);
  std::ofstream(go_file) << "go";
}

}  // namespace

TEST_CASE("streams take torchrun's routes: inherited, tee'd with a prefix, file, /dev/null") {
  SignalChannel signals({SIGTERM});
  const TempDir temp;
  const std::string& dir = temp.path();
  // Rank 0 writes to the console itself, so rank 1 starts only once rank 0 wrote: otherwise
  // "plain" can land between rank 1's partial line "[w1]:tail" and the newline the pump adds
  // at its end (seen in CI).
  const std::string rank0_wrote = dir + "/rank0_wrote";
  REQUIRE(::mkfifo(rank0_wrote.c_str(), 0600) == 0);
  // Rank 0: torchrun's default, the agent's own stdout and stderr, untouched.
  WorkerLaunch inherited = shell_worker(0, "echo plain; echo plain-err >&2; echo > " + rank0_wrote);
  // Rank 1: --tee 1: the file raw, the console prefixed.
  WorkerLaunch teed = shell_worker(
      1, "read x < " + rank0_wrote + "; printf 'a\\nb\\n'; printf tail; echo err-1 >&2");
  teed.logs.out = route(StreamRoute::kTee, dir + "/out1.log");
  // Rank 2: stdout hidden by --local-ranks-filter, stderr redirected.
  WorkerLaunch hidden = shell_worker(2, "echo hidden; echo err-2 >&2");
  hidden.logs.out = route(StreamRoute::kDiscard);
  hidden.logs.err = route(StreamRoute::kFile, dir + "/err2.log");
  CapturedConsole console;
  {
    WorkerGroup group({inherited, teed, hidden}, signals.original_mask(), kReapAfterKillLimit);
    wait_until_all_exited(group, signals, std::chrono::seconds(10));
    CHECK(group.state() == GroupState::kSucceeded);
  }
  console.restore();
  // Order between workers is not fixed; each worker's own lines are.
  CHECK(console.out().find("plain\n") != std::string::npos);
  CHECK(console.out().find("[w0]") == std::string::npos);
  CHECK(console.out().find("[w1]:a\n[w1]:b\n[w1]:tail\n") != std::string::npos);
  CHECK(console.out().find("hidden") == std::string::npos);
  CHECK(console.err().find("plain-err\n") != std::string::npos);
  CHECK(console.err().find("err-1\n") != std::string::npos);  // stderr of rank 1 not tee'd
  CHECK(console.err().find("[w1]") == std::string::npos);
  CHECK(console.err().find("err-2") == std::string::npos);
  CHECK(file_text(dir + "/out1.log") == "a\nb\ntail");
  CHECK(file_text(dir + "/err2.log") == "err-2\n");
}

TEST_CASE("a tee'd partial line and a progress bar reach the console before their newline") {
  SignalChannel signals({SIGTERM});
  const TempDir temp;
  const std::string& dir = temp.path();
  const std::string go1 = dir + "/go1";
  const std::string go2 = dir + "/go2";
  REQUIRE(::mkfifo(go1.c_str(), 0600) == 0);
  REQUIRE(::mkfifo(go2.c_str(), 0600) == 0);
  auto wait_file = [](const std::string& fifo) { return "read x < " + fifo + "; "; };
  // The worker stops after each piece until the test has seen that piece on the console.
  WorkerLaunch teed =
      shell_worker(0, "printf 'prompt> '; " + wait_file(go1) + "printf '\\r 10%%'; " +
                          wait_file(go2) + "printf '\\r100%%\\n'");
  teed.logs.out = route(StreamRoute::kTee, dir + "/out0.log");
  CapturedConsole console;
  {
    WorkerGroup group({teed}, signals.original_mask(), kReapAfterKillLimit);
    wait_for_console_then_release(group, signals, console, "[w0]:prompt> ", go1);
    wait_for_console_then_release(group, signals, console, "\r[w0]: 10%", go2);
    wait_until_all_exited(group, signals, std::chrono::seconds(10));
  }
  console.restore();
  CHECK(console.out() == "[w0]:prompt> \r[w0]: 10%\r[w0]:100%\n");
  CHECK(file_text(dir + "/out0.log") == "prompt> \r 10%\r100%\n");
}

TEST_CASE("--duplicate-*-filters: matching lines of every tee'd rank, prefixed, in one file") {
  SignalChannel signals({SIGTERM});
  const TempDir temp;
  const std::string& dir = temp.path();
  const std::string filtered = dir + "/filtered_stdout.log";
  std::vector<WorkerLaunch> launches;
  for (int rank = 0; rank < 2; ++rank) {
    WorkerLaunch launch = shell_worker(rank,
                                       "echo \"step 1 loss=$LOCAL_RANK\"; echo noise; "
                                       "printf 'acc=1\\rlast loss'");
    launch.logs.out = route(StreamRoute::kTee, dir + "/out" + std::to_string(rank) + ".log");
    launch.logs.out.duplicate_file = filtered;
    launch.logs.out.duplicate_filters = {"loss", "acc"};
    launches.push_back(launch);
  }
  CapturedConsole console;
  {
    WorkerGroup group(launches, signals.original_mask(), kReapAfterKillLimit);
    wait_until_all_exited(group, signals, std::chrono::seconds(10));
  }
  console.restore();
  const std::string copies = file_text(filtered);
  INFO(copies);
  for (const char* rank : {"0", "1"}) {
    const std::string prefix = std::string("[w") + rank + "]:";
    CHECK(copies.find(prefix + "step 1 loss=" + rank + "\n") != std::string::npos);
    CHECK(copies.find(prefix + "acc=1\n") != std::string::npos);      // '\r' ends a line
    CHECK(copies.find(prefix + "last loss\n") != std::string::npos);  // the unterminated end
  }
  CHECK(copies.find("noise") == std::string::npos);
  CHECK(std::count(copies.begin(), copies.end(), '\n') == 6);
}

TEST_CASE("a rank that failed on its own before the stop reached it is a failure, not stopped") {
  SignalChannel signals({SIGTERM});
  const TempDir temp;
  const std::string& dir = temp.path();
  const std::string fifo = dir + "/handoff";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Ranks 0 and 1 fail together (a FIFO hand-off), rank 2 keeps running. The group stops at
  // the first failure it reaps, which may be either (rank 1 can exit before rank 0 has); both
  // ignore SIGTERM, so each one's exit is its own whether it came before the stop or after (the
  // test does not race): a failure, not stopped. Rank 2 ends by the stop.
  std::vector<WorkerLaunch> launches = {
      shell_worker(0, "trap '' TERM; echo x > " + fifo + "; exit 3"),
      shell_worker(1, "trap '' TERM; read x < " + fifo + "; exit 5"),
      shell_worker(2, "exec sleep 60"),
  };
  WorkerGroup group(launches, signals.original_mask(), kReapAfterKillLimit);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (group.state() != GroupState::kFailed && Clock::now() < deadline) {
    wait_group(group, signals, -1,
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  }
  REQUIRE(group.state() == GroupState::kFailed);
  // What the run loop does next: stop the rest.
  stop_group(group, signals, SIGTERM, std::chrono::seconds(5));
  const auto& w = group.workers();
  CHECK(w[0].exit->exit_code == 3);
  CHECK(w[1].exit->exit_code == 5);
  CHECK_FALSE(w[0].stopped_by_agent);
  CHECK_FALSE(w[1].stopped_by_agent);
  CHECK(w[2].exit->exit_code == -SIGTERM);
  CHECK(w[2].stopped_by_agent);
}

TEST_CASE("--numa-binding's CPU set is the worker's before exec") {
  SignalChannel signals({SIGTERM});
  const TempDir temp;
  const std::string& dir = temp.path();
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  int last_cpu = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mine))
      last_cpu = cpu;
  }
  REQUIRE(last_cpu >= 0);
  WorkerLaunch bound = shell_worker(0, "grep Cpus_allowed_list /proc/self/status > " + dir +
                                           "/cpus; exec nproc >> " + dir + "/cpus");
  bound.cpu_affinity = {last_cpu};
  WorkerLaunch impossible = shell_worker(1, "true");
  impossible.cpu_affinity = {CPU_SETSIZE * 4};  // no such CPU
  CapturedConsole console;
  WorkerGroup group({bound, impossible}, signals.original_mask(), kReapAfterKillLimit);
  wait_until_all_exited(group, signals, std::chrono::seconds(10));
  console.restore();
  CHECK(group.workers()[0].exit->exit_code == 0);
  CHECK(file_text(dir + "/cpus") == "Cpus_allowed_list:\t" + std::to_string(last_cpu) + "\n1\n");
  CHECK(group.workers()[1].exit->exit_code == 127);
  CHECK_THAT(console.err(), Catch::Contains("ddprun: cannot bind the worker to its CPUs"));
}

TEST_CASE("exit codes, signals and exec failures are recorded per worker") {
  SignalChannel signals({SIGTERM});
  WorkerLaunch missing = shell_worker(2, "");
  missing.argv = {"/nonexistent/worker"};
  CapturedConsole console;
  WorkerGroup group({shell_worker(0, "exit 3"), shell_worker(1, "kill -9 $$"), missing},
                    signals.original_mask(), kReapAfterKillLimit);
  wait_until_all_exited(group, signals, std::chrono::seconds(10));
  console.restore();
  CHECK(group.state() == GroupState::kFailed);
  CHECK(group.workers()[0].exit->exit_code == 3);
  CHECK(group.workers()[1].exit->exit_code == -SIGKILL);
  CHECK(group.workers()[2].exit->exit_code == 127);
  CHECK_FALSE(group.workers()[0].stopped_by_agent);
  CHECK(console.err().find("ddprun: cannot execute /nonexistent/worker") != std::string::npos);
}

TEST_CASE("stop: the signal first, SIGKILL after the timeout, grandchildren included") {
  SignalChannel signals({SIGTERM});
  const TempDir temp;
  const std::string marker = temp / "got_term";
  const std::string pid_file = temp / "grandchild";
  // Worker 0 exits cleanly on SIGTERM; worker 1 ignores it and has a grandchild.
  WorkerLaunch polite =
      shell_worker(0, "trap 'echo term > " + marker +
                          "; exit 0' TERM; echo ready; while :; do sleep 0.05; done");
  WorkerLaunch stubborn =
      shell_worker(1, "trap '' TERM; sleep 100 & echo $! > " + pid_file + ".tmp; mv " + pid_file +
                          ".tmp " + pid_file + "; echo ready; wait");
  CapturedConsole console;
  WorkerGroup group({polite, stubborn}, signals.original_mask(), kReapAfterKillLimit);
  // Both have installed their traps once each printed "ready" (seen by the console pump).
  const auto ready_deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < ready_deadline && ::access(pid_file.c_str(), F_OK) != 0) {
    wait_group(group, signals, -1, std::chrono::milliseconds(20));
  }
  REQUIRE(::access(pid_file.c_str(), F_OK) == 0);
  wait_group(group, signals, -1, std::chrono::milliseconds(100));  // let worker 0 reach its loop
  pid_t grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  REQUIRE(grandchild > 0);
  const auto started = Clock::now();
  stop_group(group, signals, SIGTERM, std::chrono::milliseconds(500));
  const auto took = Clock::now() - started;
  console.restore();
  REQUIRE(group.all_reaped_or_abandoned());
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

TEST_CASE("a group destroyed with a worker SIGKILL cannot end waits only its limit, then names it",
          "[freezer]") {
  // The freezer only: this process is the workers' parent, where the ptrace hold cannot be used.
  auto freezer = stuck::FreezerHold::make();
  if (!freezer) {
    skip_test("no cgroup v1 freezer here: the destructor's bound is not checked");
  }
  SignalChannel signals({SIGTERM});
  CapturedConsole console;
  std::optional<WorkerGroup> group;
  group.emplace(std::vector<WorkerLaunch>{shell_worker(0, "exec sleep 100"),
                                          shell_worker(1, "exec sleep 100")},
                signals.original_mask(), std::chrono::seconds(1));
  const pid_t stuck = group->workers()[0].pid;
  const pid_t other = group->workers()[1].pid;
  REQUIRE(freezer->hold(stuck));
  const auto started = Clock::now();
  group.reset();
  const auto took = Clock::now() - started;
  console.restore();
  INFO(console.err());
  CHECK(took >= std::chrono::seconds(1));
  CHECK(took < std::chrono::seconds(30));
  CHECK_FALSE(process_running(other));                             // reaped
  CHECK(ddprun::agent::process_state(stuck) == "D (disk sleep)");  // given up, still held
  CHECK(stuck::reported_abandoned(console.err(), stuck, "D (disk sleep)").value_or(0) >= 1.0);
  CHECK_THAT(console.err(), Catch::Contains("worker rank 10 (local_rank 0, pid " +
                                            std::to_string(stuck) + ") did not exit"));
  CHECK_THAT(console.err(), !Catch::Contains("pid " + std::to_string(other)));
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
                      signals.original_mask(), kReapAfterKillLimit);
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
