// torchrun's file-timer FIFO with real writers: PyTorch 2.x's own FileTimerClient and
// expires(after=...) (skipped, saying so, when no such python exists), and plain shells
// writing malformed requests. The loop here is the one the agent runs: wait on fd() with the
// next deadline as the timeout, then on_readable() or on_deadline().
#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <ctime>

#include "agent/watchdog/file_timer/file_timer_fifo.hpp"
#include "agent/watchdog/file_timer/file_timer_server.hpp"
#include "watchdog_support.hpp"

using namespace ddprun::agent;
using namespace ddprun::agent::watchdog_test;
using ddprun::agent::e2e::TempDir;

namespace {

double wall_now() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// Runs the agent's loop for the server until done(events so far) holds or limit passes.
template <class Done>
FileTimerServer::Events pump(FileTimerServer& server, Done done, std::chrono::milliseconds limit) {
  FileTimerServer::Events all;
  const auto give_up = Clock::now() + limit;
  while (!done(all) && Clock::now() < give_up) {
    auto wake = give_up;
    if (const std::optional<double> deadline = server.next_deadline_epoch_s()) {
      const auto until = std::chrono::duration<double>(*deadline - wall_now());
      wake = std::min(wake, Clock::now() + std::chrono::ceil<std::chrono::milliseconds>(until));
    }
    FileTimerServer::Events events = wait_readable(server.fd(), wake)
                                         ? server.on_readable(wall_now())
                                         : server.on_deadline(wall_now());
    for (auto& e : events.expired)
      all.expired.push_back(std::move(e));
    for (auto& w : events.warnings)
      all.warnings.push_back(std::move(w));
  }
  return all;
}

bool is_fifo(const std::string& path) {
  struct stat info{};
  return ::lstat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode);
}

std::vector<std::string> texts(const FileTimerFifo::Batch& batch) {
  std::vector<std::string> out;
  for (const FileTimerFifo::Line& line : batch)
    out.push_back(line.oversize ? "<oversize>" : line.text);
  return out;
}

bool readable_now(int fd) {
  pollfd ready{fd, POLLIN, 0};
  return ::poll(&ready, 1, 0) > 0;
}

void client_write(const std::string& path, const std::string& text) {
  // What FileTimerClient does: open non-blocking (fails without a reader), write, close.
  OwnedFd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
}

// A PyTorch worker: holds a timer until told to go on, then sleeps inside expires(after=1).
const char* kTimerClientScript = R"(import sys, time
from torch.distributed.elastic import timer
timer.configure(timer.FileTimerClient(sys.argv[1]))
with timer.expires(after=60, scope="held"):
    print("inside", flush=True)
    sys.stdin.readline()
print("released", flush=True)
sys.stdin.readline()
with timer.expires(after=1, scope="sleeping"):
    time.sleep(60)
)";

}  // namespace

TEST_CASE("file-timer FIFO replaces what is at the path, never reports EOF, unlinks its own") {
  TempDir dir;
  const std::string path = dir / "timer";
  e2e::write_file(path, "a stale regular file");
  {
    FileTimerFifo fifo(path);
    CHECK(is_fifo(path));
    CHECK_FALSE(readable_now(fifo.fd()));
    client_write(path, "line one\nline ");
    REQUIRE(readable_now(fifo.fd()));
    CHECK(texts(fifo.read_lines()) == std::vector<std::string>{"line one"});
    // The client has closed: without our own write end the reader would now see EOF and the
    // descriptor would stay readable (POLLHUP), spinning an event loop.
    CHECK_FALSE(readable_now(fifo.fd()));
    client_write(path, "two\n\n");
    CHECK(texts(fifo.read_lines()) == std::vector<std::string>{"line two", ""});
  }
  CHECK_FALSE(std::filesystem::exists(path));

  // A newer server's FIFO at the same path is not ours to remove.
  auto older = std::make_unique<FileTimerFifo>(path);
  FileTimerFifo newer(path);
  older.reset();
  CHECK(is_fifo(path));
}

TEST_CASE("file-timer FIFO drops over-long lines whole and keeps reading") {
  TempDir dir;
  FileTimerFifo fifo(dir / "timer");
  const std::string huge(3 * kFileTimerMaxLineBytes, 'x');
  client_write(fifo.path(), "first\n" + huge.substr(0, 2 * kFileTimerMaxLineBytes));
  CHECK(texts(fifo.read_lines()) == std::vector<std::string>{"first", "<oversize>"});
  client_write(fifo.path(), huge.substr(2 * kFileTimerMaxLineBytes) + "\nok\n");
  // The rest of the same line is dropped without counting it again.
  CHECK(texts(fifo.read_lines()) == std::vector<std::string>{"ok"});
  // Exactly PIPE_BUF bytes is still a line.
  const std::string longest(kFileTimerMaxLineBytes, 'y');
  client_write(fifo.path(), longest + "\n");
  CHECK(texts(fifo.read_lines()) == std::vector<std::string>{longest});
}

TEST_CASE("file-timer FIFO reports an impossible path") {
  CHECK_THROWS_WITH(FileTimerFifo("/nonexistent-dir/timer"),
                    Catch::Contains("/nonexistent-dir/timer") && Catch::Contains("mkfifo"));
}

TEST_CASE("malformed requests from a shell: one warning per worker group, nothing breaks") {
  TempDir dir;
  const std::string path = dir / "timer";
  const std::string script = dir / "writer.sh";
  // The shell is the "worker": its own request ($$) must still be honoured afterwards, even the
  // one written right after a partial line that never got its newline.
  e2e::write_file(script, R"(fifo="$1"
printf 'not json\n' > "$fifo"
printf '{"pid": 1}\n' > "$fifo"
head -c 5000 /dev/zero | tr '\0' x > "$fifo"; printf '\n' > "$fifo"
printf 'a partial line, its writer gone' > "$fifo"
printf '{"version": 1, "pid": %d, "scope_id": "shell", "expiration_time": 4000000000.5, "signal": 15}\n' $$ > "$fifo"
)");
  FileTimerServer server(path);
  ChildProcess shell({{"/bin/sh", script, path}, {}, dir / "shell.out"});
  server.watch({WatchedWorker{0, 0, shell.pid()}});
  const std::optional<int> status = shell.wait_exit(30s);
  REQUIRE(status);
  INFO(shell.output());
  REQUIRE(WIFEXITED(*status));
  REQUIRE(WEXITSTATUS(*status) == 0);

  FileTimerServer::Events events = server.on_readable(wall_now());
  REQUIRE(events.warnings.size() == 1);
  CHECK_THAT(events.warnings[0],
             Catch::Contains("malformed request on " + path) && Catch::Contains("not valid JSON"));
  CHECK(server.counters().malformed == 4);
  CHECK(events.expired.empty());
  CHECK(server.next_deadline_epoch_s() == 4000000000.5);  // the shell's request got through

  // More garbage in the same group: counted, not warned again.
  client_write(path, "}{\n");
  CHECK(server.on_readable(wall_now()).warnings.empty());
  CHECK(server.counters().malformed == 5);
  // The request expires: reported with its signal, as for any client.
  events = server.on_deadline(4000000000.5);
  REQUIRE(events.expired.size() == 1);
  CHECK(events.expired[0].worker.pid == shell.pid());
  CHECK(events.expired[0].signal == 15);
  CHECK(events.expired[0].scope_id == "shell");

  // A request from a process that is not a worker: one warning, ignored.
  client_write(path, R"({"version":1,"pid":999999,"scope_id":"x","expiration_time":1,"signal":9})"
                     "\n"
                     R"({"version":1,"pid":999998,"scope_id":"y","expiration_time":1,"signal":9})"
                     "\n");
  events = server.on_readable(wall_now());
  REQUIRE(events.warnings.size() == 1);
  CHECK_THAT(events.warnings[0], Catch::Contains("pid 999999") && Catch::Contains("not a worker"));
  CHECK(events.expired.empty());
  CHECK(server.counters().not_a_worker == 2);

  // The next worker group gets a fresh FIFO and a fresh warning.
  FileTimerServer next_group(path);
  client_write(path, "still not json\n");
  CHECK(next_group.on_readable(wall_now()).warnings.size() == 1);
}

TEST_CASE("PyTorch's FileTimerClient: acquire, release, and an expired sleeper reported") {
  const std::optional<std::string> python = torch_python();
  if (!python) {
    FAIL(kNoTorchPython);
  }
  TempDir dir;
  const std::string path = dir / "watchdog_timer_test";
  const std::string script = dir / "client.py";
  e2e::write_file(script, kTimerClientScript);
  FileTimerServer server(path);
  ChildProcess worker({{*python, script, path}, {}, dir / "client.out"});
  server.watch({WatchedWorker{0, 5, worker.pid()}});
  INFO(worker.output());

  // Acquired: one timer about a minute ahead.
  const double before = wall_now();
  FileTimerServer::Events events =
      pump(server, [&](const auto&) { return server.counters().requests >= 1; }, 60s);
  REQUIRE(server.counters().requests == 1);
  CHECK(events.warnings.empty());
  REQUIRE(server.next_deadline_epoch_s());
  CHECK(*server.next_deadline_epoch_s() > before + 30);

  // Released on leaving the block.
  worker.write_stdin("\n");
  events = pump(server, [&](const auto&) { return server.counters().requests >= 2; }, 30s);
  REQUIRE(server.counters().requests == 2);
  CHECK(server.next_deadline_epoch_s() == std::nullopt);
  CHECK(events.expired.empty());

  // Sleeps inside expires(after=1): reported expired, with SIGKILL (the client's default) and
  // its pid. (PyTorch's default scope names contextlib.py, not the caller: we pass one.)
  worker.write_stdin("\n");
  events = pump(server, [](const auto& all) { return !all.expired.empty(); }, 30s);
  REQUIRE(events.expired.size() == 1);
  const TimerExpiry& expiry = events.expired[0];
  CHECK(expiry.worker.pid == worker.pid());
  CHECK(expiry.worker.global_rank == 5);
  CHECK(expiry.signal == SIGKILL);
  CHECK(expiry.scope_id == "sleeping");
  CHECK(events.warnings.empty());
  CHECK(server.counters().malformed == 0);
  // The agent acts on it; the worker dies of that signal.
  REQUIRE(::kill(expiry.worker.pid, expiry.signal) == 0);
  const std::optional<int> status = worker.wait_exit(30s);
  REQUIRE(status);
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGKILL);
}
