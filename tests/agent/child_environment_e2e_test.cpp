// No child of ddprun gets the job secret or etcd's password, with the real ddprun: a worker, the
// --health-check command and a stack tool (a py-spy stand-in first on the agent's PATH, run by
// `ddprun stacks`) each write their environment to a file, and none holds the secret, the
// password or their variables. The agent that holds them is not dumpable (its workers are),
// and its /proc/PID/environ no longer shows the secret it started with. Run as root, the test
// starts the agent as nobody, so that its dumpability shows.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "e2e_support.hpp"
#include "tests/rendezvous/etcd_cluster.hpp"

using namespace ddprun::agent::e2e;
using ddprun::rendezvous::testing::EtcdCluster;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "child-env-secret-0123456789abcdef";
const std::string kFileSecret = "child-env-secret-from-a-file-0123";
const std::string kPassword = "child-env-etcd-password-0123456789";
const std::string kRunId = "child-env";

constexpr uid_t kNobody = 65534;

// Root runs the agent as nobody: the owner of the files in /proc/PID of a process of another
// user shows whether it is dumpable (root when it is not, its own user when it is), where a
// test running as the agent's own user, root included, cannot tell.
bool agent_runs_as_nobody() {
  return ::geteuid() == 0 && ::access("/usr/bin/setpriv", X_OK) == 0;
}

uid_t proc_owner(pid_t pid) {
  struct stat status{};
  REQUIRE(::stat(("/proc/" + std::to_string(pid) + "/status").c_str(), &status) == 0);
  return status.st_uid;
}

// A ddprun job of one node whose children each write their environment to <dir>/<name>.env:
// the worker (then it waits at the gate), the --health-check command, and the py-spy stand-in.
struct LeakCheckJob {
  TempDir dir;
  WorkerGate gate{dir};
  std::vector<std::string> rendezvous;  // --rdzv_* options of the job and of `ddprun stacks`
  std::map<std::string, std::string> env;
  bool as_nobody = agent_runs_as_nobody();

  LeakCheckJob() {
    fs::create_directories(dir / "bin");
    write_file(dir / "bin/py-spy", "#!/bin/sh\nenv > " + dir / "stack-tool.env" + "\n");
    fs::permissions(dir / "bin/py-spy", fs::perms::owner_all);
    env = {{"PATH", dir / "bin:" + std::string(std::getenv("PATH"))},
           {"TMPDIR", dir.path()},  // the agent's log folder
           {"OMP_NUM_THREADS", "1"},
           {"DDPRUN_RDZV_SECRET", kSecret},
           {"DDPRUN_ETCD_PASSWORD", kPassword}};
  }

  // A file of mode 0600 in the job's folder, the agent's to read.
  std::string private_file(const std::string& name, const std::string& text) const {
    write_file(dir / name, text);
    fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write);
    return dir / name;
  }

  // Everything in the job's folder becomes nobody's, when the agent runs as nobody.
  void hand_over_folder() const {
    if (!as_nobody)
      return;
    REQUIRE(::chown(dir.path().c_str(), kNobody, kNobody) == 0);
    for (const auto& entry : fs::recursive_directory_iterator(dir.path()))
      REQUIRE(::chown(entry.path().c_str(), kNobody, kNobody) == 0);
  }

  std::vector<std::string> agent_argv() const {
    std::vector<std::string> argv;
    if (as_nobody)
      argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    argv.insert(argv.end(), {ddprun_binary(), "--nnodes", "1", "--nproc_per_node", "1"});
    argv.insert(argv.end(), rendezvous.begin(), rendezvous.end());
    // `read` at the gate ends with status 1 (end of file): the worker itself succeeds.
    argv.insert(argv.end(),
                {"--health-check", "env > " + dir / "health-check.env", "--no_python", "/bin/sh",
                 "-c", "env > " + dir / "worker.env; " + gate.wait_command() + "; exit 0"});
    return argv;
  }

  std::vector<std::string> stacks_argv() const {
    std::vector<std::string> argv{ddprun_binary(), "stacks"};
    argv.insert(argv.end(), rendezvous.begin(), rendezvous.end());
    return argv;
  }
};

// Runs the job to its end: while its worker waits, `ddprun stacks` runs the stand-in and the
// agent's and worker's dumpability are looked at. Returns the children's environments by name.
std::map<std::string, std::string> run_and_collect(LeakCheckJob& job) {
  job.hand_over_folder();
  Process agent(job.agent_argv(), job.dir / "agent.out", job.env);
  if (!job.gate.wait_until_all_wait({0}, 60s))
    FAIL("the worker did not start; the agent said:\n" << agent.output());
  Process stacks(job.stacks_argv(), job.dir / "stacks.out", job.env);
  const auto stacks_status = stacks.wait_exit(60s);
  INFO("ddprun stacks said:\n" << stacks.output());
  REQUIRE(stacks_status == 0);

  const pid_t worker = std::stoi(read_file(job.dir / "waiting.0"));
  // The suite runs as root (scripts/test.sh), which starts the agent as nobody.
  INFO("not root, or no setpriv: the agent cannot run as nobody, and its dumpability not show");
  REQUIRE(job.as_nobody);
  CHECK(proc_owner(agent.pid()) == 0);   // not dumpable
  CHECK(proc_owner(worker) == kNobody);  // dumpable again after execve
  // The environment the agent started with, as the kernel keeps it: the values are zeroed.
  // Only CAP_SYS_PTRACE reads it, the agent being not dumpable.
  const std::string agent_environ = read_file("/proc/" + std::to_string(agent.pid()) + "/environ");
  INFO("the agent's /proc/PID/environ is empty or unreadable (root reads it: CAP_SYS_PTRACE)");
  REQUIRE_FALSE(agent_environ.empty());
  CHECK(agent_environ.find(kSecret) == std::string::npos);
  CHECK(agent_environ.find(kPassword) == std::string::npos);

  job.gate.open();
  const auto agent_status = agent.wait_exit(60s);
  INFO("the agent said:\n" << agent.output());
  REQUIRE(agent_status == 0);
  std::map<std::string, std::string> children;
  for (const char* name : {"worker", "health-check", "stack-tool"})
    children[name] = read_file(job.dir / (std::string(name) + ".env"));
  return children;
}

void check_clean(const std::map<std::string, std::string>& children) {
  for (const auto& [name, environment] : children) {
    INFO(name << "'s environment:\n" << environment);
    CHECK(environment.find("PATH=") != std::string::npos);  // it was written
    for (const std::string& leak :
         {kSecret, kFileSecret, kPassword, std::string("DDPRUN_RDZV_SECRET="),
          std::string("DDPRUN_ETCD_PASSWORD=")})
      CHECK(environment.find(leak) == std::string::npos);
  }
}

}  // namespace

TEST_CASE("no child of a c10d agent sees the job secret or etcd's password", "[job_secret]") {
  LeakCheckJob job;
  job.rendezvous = {
      "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:" + std::to_string(free_port()),
      "--rdzv_id",      kRunId, "--rdzv_conf",     kFastRdzv};
  SECTION("the secret from DDPRUN_RDZV_SECRET") {
    check_clean(run_and_collect(job));
  }
  SECTION("the secret from DDPRUN_RDZV_SECRET_FILE, whose path the children may see") {
    const std::string file = job.private_file("job.key", kFileSecret + "\n");
    job.env.erase("DDPRUN_RDZV_SECRET");
    job.env["DDPRUN_RDZV_SECRET_FILE"] = file;
    const auto children = run_and_collect(job);
    check_clean(children);
    CHECK(children.at("worker").find("DDPRUN_RDZV_SECRET_FILE=" + file) != std::string::npos);
  }
}

TEST_CASE("no child of an etcd agent sees etcd's password", "[job_secret][etcd]") {
  EtcdCluster etcd;
  etcd.enable_auth("ddprun-job", kPassword, "/jobs/leak/");
  LeakCheckJob job;
  job.rendezvous = {"--rdzv_backend",
                    "etcd",
                    "--rdzv_endpoint",
                    etcd.endpoints(),
                    "--rdzv_id",
                    kRunId,
                    "--rdzv_conf",
                    "join_timeout=30,last_call_timeout=0.5,etcd_prefix=/jobs/leak,"
                    "user=ddprun-job,insecure_auth=1"};
  check_clean(run_and_collect(job));
}
