// The progress heartbeat channel with real child processes: the README's Python one-liner,
// a writer that fills the pipe (it must never block), the end of the channel when the worker
// exits, and the trainer's ProgressHeartbeat. The fd is installed in the child exactly as
// spawn_worker must do it (HeartbeatChannel::install_in_child, then close_range from its result).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "agent/watchdog/progress/progress_watch.hpp"
#include "watchdog_support.hpp"
#include "worker-runtime/progress_heartbeat.hpp"

using namespace ddprun::agent;
using namespace ddprun::agent::watchdog_test;
using ddprun::agent::e2e::TempDir;

namespace {

// README: the one line a Python worker adds to its training loop.
const char* kPythonWorker = R"(import os, sys
for step in range(3):
    if "DDPRUN_HEARTBEAT_FD" in os.environ:
        os.write(int(os.environ["DDPRUN_HEARTBEAT_FD"]), b".")
    sys.stdin.readline()
)";

// Writes until the pipe is full: with a blocking write end this would hang (and the test time
// out); with ours it reports EAGAIN.
const char* kFloodingWorker = R"(import os
fd = int(os.environ["DDPRUN_HEARTBEAT_FD"])
written = 0
try:
    while written < 10_000_000:
        written += os.write(fd, b"." * 4096)
    print("never blocked, never full", flush=True)
except BlockingIOError:
    print("EAGAIN after", written, flush=True)
)";

// Drains until at least `bytes` arrived or the channel closed; bounded.
HeartbeatChannel::Drained drain_until(HeartbeatChannel& channel, std::size_t bytes, bool closed,
                                      std::chrono::milliseconds limit) {
  HeartbeatChannel::Drained total;
  const auto give_up = Clock::now() + limit;
  while (total.bytes < bytes || (closed && !total.closed)) {
    if (!wait_readable(channel.fd(), give_up))
      break;
    const HeartbeatChannel::Drained drained = channel.drain();
    total.bytes += drained.bytes;
    total.closed = total.closed || drained.closed;
    if (total.closed)
      break;
  }
  return total;
}

// A Python worker running `script` (written to <dir>/<name>.py) started as spawn_worker starts
// one: the heartbeat fd named in its environment and the channel's write end installed there.
// Its output goes to <dir>/<name>.out.
ChildOptions python_worker(const TempDir& dir, const std::string& name, const char* script,
                           const HeartbeatChannel& channel) {
  e2e::write_file(dir / (name + ".py"), script);
  EnvMap env;
  HeartbeatChannel::add_to_env(env);
  return {.argv = {"/usr/bin/python3", dir / (name + ".py")},
          .env_changes = env,
          .output_path = dir / (name + ".out"),
          .heartbeat_fd = channel.worker_end()};
}

}  // namespace

TEST_CASE("heartbeat channel: a Python worker beats with the README one-liner") {
  TempDir dir;
  HeartbeatChannel channel;
  const ChildOptions options = python_worker(dir, "worker", kPythonWorker, channel);
  REQUIRE(options.env_changes.at("DDPRUN_HEARTBEAT_FD") == "3");
  ChildProcess worker(options);
  channel.close_worker_end();
  INFO(worker.output());

  ProgressWatch watch(std::chrono::seconds(10));
  watch.start_group({WatchedWorker{0, 0, worker.pid()}});
  const ProgressWatch::TimePoint t0{};
  CHECK_FALSE(watch.armed(0));

  for (int step = 0; step < 3; ++step) {
    const HeartbeatChannel::Drained drained = drain_until(channel, 1, false, 30s);
    REQUIRE(drained.bytes == 1);
    CHECK_FALSE(drained.closed);
    watch.on_heartbeat(0, t0 + step * std::chrono::seconds(1));
    worker.write_stdin("\n");
  }
  CHECK(watch.armed(0));
  // The worker exits: every write end is gone, the channel says so (and stays readable).
  const HeartbeatChannel::Drained end = drain_until(channel, 0, true, 30s);
  CHECK(end.closed);
  const std::optional<int> status = worker.wait_exit(30s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  // Silent since its last beat at t0 + 2 s.
  CHECK(watch.take_hung(t0 + std::chrono::seconds(11)).empty());
  REQUIRE(watch.take_hung(t0 + std::chrono::seconds(12)).size() == 1);
}

TEST_CASE("heartbeat channel: a worker never blocks on a full pipe") {
  TempDir dir;
  HeartbeatChannel channel;
  ChildProcess worker(python_worker(dir, "flood", kFloodingWorker, channel));
  channel.close_worker_end();
  const std::optional<int> status = worker.wait_exit(30s);
  INFO(worker.output());
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK_THAT(worker.output(), Catch::StartsWith("EAGAIN after"));
  // The agent drains a full pipe in bounded steps and then sees the end.
  std::size_t total = 0;
  bool closed = false;
  for (int round = 0; round < 64 && !closed; ++round) {
    const HeartbeatChannel::Drained drained = channel.drain();
    CHECK(drained.bytes <= kHeartbeatDrainBudgetBytes);
    total += drained.bytes;
    closed = drained.closed;
  }
  CHECK(closed);
  CHECK(total > 0);
}

TEST_CASE("heartbeat channel: the write end already at fd 3 loses close-on-exec") {
  TempDir dir;
  e2e::write_file(dir / "worker.py", "import os\nos.write(3, b'x')\n");
  HeartbeatChannel channel;
  ChildProcess worker({{"/usr/bin/python3", dir / "worker.py"},
                       {},
                       dir / "worker.out",
                       channel.worker_end(),
                       true});
  channel.close_worker_end();
  INFO(worker.output());
  const HeartbeatChannel::Drained drained = drain_until(channel, 1, true, 30s);
  CHECK(drained.bytes == 1);
  CHECK(drained.closed);
}

TEST_CASE("the trainer's ProgressHeartbeat writes one byte per beat, only to a pipe") {
  using ddprun::train::parse_heartbeat_fd;
  using ddprun::train::ProgressHeartbeat;
  CHECK(parse_heartbeat_fd("3") == 3);
  CHECK(parse_heartbeat_fd("0") == 0);
  CHECK(parse_heartbeat_fd(nullptr) == std::nullopt);
  for (const char* bad : {"", "-1", "3 ", "x", "1e3", "99999999999"})
    CHECK(parse_heartbeat_fd(bad) == std::nullopt);

  HeartbeatChannel channel;
  ProgressHeartbeat heartbeat(channel.worker_end());
  CHECK(heartbeat.enabled());
  heartbeat.beat();
  heartbeat.beat();
  CHECK(channel.drain().bytes == 2);
  CHECK_FALSE(ProgressHeartbeat(-1).enabled());
  ProgressHeartbeat(-1).beat();  // a no-op

  // From the environment: only a descriptor that is a pipe counts.
  TempDir dir;
  e2e::write_file(dir / "file", "");
  OwnedFd regular(::open((dir / "file").c_str(), O_WRONLY | O_CLOEXEC));
  ::setenv("DDPRUN_HEARTBEAT_FD", std::to_string(regular.get()).c_str(), 1);
  CHECK_FALSE(ProgressHeartbeat::from_environment().enabled());
  ::setenv("DDPRUN_HEARTBEAT_FD", std::to_string(channel.worker_end()).c_str(), 1);
  ProgressHeartbeat from_env = ProgressHeartbeat::from_environment();
  CHECK(from_env.enabled());
  from_env.beat();
  CHECK(channel.drain().bytes == 1);
  ::unsetenv("DDPRUN_HEARTBEAT_FD");
  CHECK_FALSE(ProgressHeartbeat::from_environment().enabled());
  // The agent's end closed: the beat fails once (EPIPE; the agent's workers get SIGPIPE
  // instead, which is why the agent keeps its end until the worker is reaped) and the heartbeat
  // goes quiet.
  int ends[2];
  REQUIRE(::pipe2(ends, O_CLOEXEC | O_NONBLOCK) == 0);
  OwnedFd write_end(ends[1]);
  ::close(ends[0]);
  struct sigaction ignore{}, previous{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  ProgressHeartbeat lonely(write_end.get());
  lonely.beat();
  ::sigaction(SIGPIPE, &previous, nullptr);
  CHECK_FALSE(lonely.enabled());
}
