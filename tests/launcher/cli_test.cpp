// The real ddprun executable: exit statuses, the one-line error messages for the bad inputs
// of the foundation issue, --help, --version, --print-config, and that it does not link
// LibTorch. Each run is a child process with a clean, explicit environment.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "../exec_args.hpp"

namespace {

struct Result {
  int status = -1;  // exit status, or -1 if killed
  std::string out;
  std::string err;
};

using Env = std::map<std::string, std::string>;

// Runs `program args` with exactly `env` (plus PATH), capturing both streams, with a deadline.
Result run(const std::string& program, const std::vector<std::string>& args, Env env = {}) {
  env.emplace("PATH", "/usr/local/bin:/usr/bin:/bin");
  int out_pipe[2];
  int err_pipe[2];
  REQUIRE(::pipe(out_pipe) == 0);
  REQUIRE(::pipe(err_pipe) == 0);
  std::vector<std::string> program_and_args{program};
  program_and_args.insert(program_and_args.end(), args.begin(), args.end());
  const ddprun::testing::ExecArgs argv(std::move(program_and_args));
  const ddprun::testing::ExecArgs envp(ddprun::testing::environment_entries(env));

  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    ::execve(argv.get()[0], argv.get(), envp.get());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  Result result;
  std::array<pollfd, 2> fds{pollfd{out_pipe[0], POLLIN, 0}, pollfd{err_pipe[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int open_streams = 2;
  while (open_streams > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0)
      continue;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_streams;
      }
    }
  }
  if (open_streams > 0)
    ::kill(pid, SIGKILL);  // past the deadline
  for (auto& fd : fds) {
    if (fd.fd >= 0)
      ::close(fd.fd);
  }
  int wait_status = 0;
  ::waitpid(pid, &wait_status, 0);
  result.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  return result;
}

const std::string kDdprun = std::string(DDPRUN_BIN_DIR) + "/ddprun";

Result run_ddprun(const std::vector<std::string>& args, Env env = {}) {
  return run(kDdprun, args, std::move(env));
}

struct PrintedConfig {
  nlohmann::json config;
  std::string err;
};

// `ddprun --print-config ARGS`, which must exit 0 with the configuration as JSON on stdout.
PrintedConfig print_config(const std::vector<std::string>& args, Env env = {}) {
  std::vector<std::string> command_line{"--print-config"};
  for (const auto& arg : args) {
    command_line.push_back(arg);
  }
  const Result r = run_ddprun(command_line, std::move(env));
  INFO(r.err);
  REQUIRE(r.status == 0);
  return {nlohmann::json::parse(r.out), r.err};
}

std::size_t line_count(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("each bad input of the foundation issue exits 2 with one line naming the option") {
  struct BadInput {
    std::vector<std::string> args;
    std::string option;  // must appear right after "ddprun: error: "
  };
  const std::vector<BadInput> cases{
      {{"--nnodes", "3:2", "s.py"}, "--nnodes"},
      {{"--nnodes", "0", "s.py"}, "--nnodes"},
      {{"--nnodes", "1:2:3", "s.py"}, "--nnodes"},
      {{"--nproc_per_node", "abc", "s.py"}, "--nproc_per_node"},
      {{"--rdzv_endpoint", "host:99999", "s.py"}, "--rdzv_endpoint"},
      {{"--rdzv_endpoint", "[::1", "s.py"}, "--rdzv_endpoint"},
      {{"--rdzv_conf", "join_timeout=", "s.py"}, "--rdzv_conf"},
      {{"--rdzv_conf", "=5", "s.py"}, "--rdzv_conf"},
      {{"-m", "--no_python", "s.py"}, "-m/--module"},
      {{"--redirects", "0:4", "s.py"}, "--redirects"},
      {{"--max_restarts", "-1", "s.py"}, "--max_restarts"},
      {{"--no-such-option", "s.py"}, "--no-such-option"},
      {{"--nnodes", "2"}, "training_script"},
      {{"--nnodes"}, "--nnodes"},
      {{"--standalone=1", "s.py"}, "--standalone"},
      {{"--logs_specs=DOESNOT_EXIST", "s.py"}, "--logs_specs"},
      {{"--logs-specs", "", "s.py"}, "--logs-specs"},
  };
  for (const auto& bad : cases) {
    INFO("ddprun " << bad.args.front() << " ...");
    const Result r = run_ddprun(bad.args);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("ddprun: error: " + bad.option + ": "));
    CHECK_THAT(r.err, Catch::Contains("; expected "));
    CHECK(line_count(r.err) == 1);
  }
}

TEST_CASE("etcd credentials over plain http are a usage error unless insecure_auth=1") {
  const std::vector<std::string> etcd = {"--rdzv_backend", "etcd", "--rdzv_endpoint",
                                         "127.0.0.1:2379", "--rdzv_conf"};
  const auto run_etcd = [&](const std::string& rdzv_conf, Env env = {}) {
    std::vector<std::string> args = etcd;
    args.insert(args.end(), {rdzv_conf, "--no-python", "/bin/true"});
    return run_ddprun(args, std::move(env));
  };
  const Result in_clear = run_etcd("user=job", {{"DDPRUN_ETCD_PASSWORD", "etcd-password"}});
  CHECK(in_clear.status == 2);
  CHECK_THAT(in_clear.err,
             Catch::StartsWith("ddprun: error: --rdzv_conf: rdzv_conf user: the etcd password, "
                               "and the token etcd trades for it, would cross the network in "
                               "clear over http; give protocol=https (and cacert), or "
                               "insecure_auth=1 where the network is trusted"));
  CHECK_THAT(in_clear.err, !Catch::Contains("etcd-password"));
  const Result typo = run_etcd("user=job,insecure_auth=yes");
  CHECK(typo.status == 2);
  CHECK_THAT(typo.err, Catch::Contains("rdzv_conf insecure_auth: 'yes' is not a valid choice"));
  // The opt-in: the configuration is printed, the password is not.
  const Result opted_in =
      run_ddprun({"--print-config", "--rdzv_backend", "etcd", "--rdzv_endpoint", "127.0.0.1:2379",
                  "--rdzv_conf", "user=job,insecure_auth=1", "--no-python", "/bin/true"},
                 {{"DDPRUN_ETCD_PASSWORD", "etcd-password"}});
  INFO(opted_in.err);
  CHECK(opted_in.status == 0);
  CHECK_THAT(opted_in.out, Catch::Contains("\"insecure_auth\": \"1\""));
  CHECK_THAT(opted_in.out, !Catch::Contains("etcd-password"));
}

TEST_CASE("a job secret of fewer than 16 bytes is a usage error that says how to make one") {
  const Result weak = run_ddprun({"--standalone", "--no-python", "/bin/true"},
                                 {{"DDPRUN_RDZV_SECRET", "0123456789abcde"}});
  CHECK(weak.status == 2);
  CHECK(weak.err ==
        "ddprun: error: DDPRUN_RDZV_SECRET: the secret is 15 bytes long (trailing blanks not "
        "counted); at least 16 are needed; expected a secret of at least 16 bytes, such as "
        "`head -c 32 /dev/urandom | base64`, in a file only its owner may read (chmod 600)\n");
}

TEST_CASE("a bad TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT is a usage error naming it") {
  const Result r = run_ddprun({"s.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "soon"}});
  CHECK(r.status == 2);
  CHECK(r.err ==
        "ddprun: error: TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: 'soon' is not a number; "
        "expected a number of seconds, 0 or more, at most 1e7\n");
}

TEST_CASE("PET_* values are checked too, and the message names the variable") {
  const Result r = run_ddprun({"s.py"}, {{"PET_NNODES", "3:2"}});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::StartsWith("ddprun: error: --nnodes (from PET_NNODES): "));
}

TEST_CASE("--help lists every torchrun option in both spellings and documents exit codes") {
  // The torchrun options of torchrun.md section 1.2, written out here on purpose: the help is
  // generated from the option table, so the test must not be.
  const std::vector<std::string> spellings{
      "--nnodes",
      "--nproc-per-node",
      "--nproc_per_node",
      "--rdzv-backend",
      "--rdzv_backend",
      "--rdzv-endpoint",
      "--rdzv_endpoint",
      "--rdzv-id",
      "--rdzv_id",
      "--rdzv-conf",
      "--rdzv_conf",
      "--standalone",
      "--max-restarts",
      "--max_restarts",
      "--monitor-interval",
      "--monitor_interval",
      "--start-method",
      "--start_method",
      "--event-log-handler",
      "--event_log_handler",
      "--role",
      "-m",
      "--module",
      "--no-python",
      "--no_python",
      "--run-path",
      "--run_path",
      "--log-dir",
      "--log_dir",
      "-r",
      "--redirects",
      "-t",
      "--tee",
      "--local-ranks-filter",
      "--local_ranks_filter",
      "--duplicate-stdout-filters",
      "--duplicate_stdout_filters",
      "--duplicate-stderr-filters",
      "--duplicate_stderr_filters",
      "--node-rank",
      "--node_rank",
      "--master-addr",
      "--master_addr",
      "--master-port",
      "--master_port",
      "--local-addr",
      "--local_addr",
      "--logs-specs",
      "--logs_specs",
      "--numa-binding",
      "--numa_binding",
      "--signals-to-handle",
      "--signals_to_handle",
      "--shutdown-timeout",
      "--shutdown_timeout",
      "--virtual-local-rank",
      "--virtual_local_rank",
      // ddprun extras
      "--print-config",
      "--events-file",
      "--exit-barrier-timeout",
      "--watchdog-timeout",
      "--watchdog_timeout",
      "--version",
      "--help",
  };
  for (const char* flag : {"--help", "-h"}) {
    const Result r = run_ddprun({"--nnodes", "2", flag});
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    for (const auto& spelling : spellings) {
      INFO(spelling);
      // As an option heading: at a line start or after ", ", followed by a space, comma or EOL.
      const bool listed = r.out.find("  " + spelling + " ") != std::string::npos ||
                          r.out.find("  " + spelling + ",") != std::string::npos ||
                          r.out.find(", " + spelling + " ") != std::string::npos ||
                          r.out.find(", " + spelling + "\n") != std::string::npos ||
                          r.out.find("  " + spelling + "\n") != std::string::npos;
      CHECK(listed);
    }
    for (const char* heading : {"Nodes and rendezvous:", "Workers:", "Restarts and signals:",
                                "Logs:", "Entry point:", "ddprun extras:", "Exit status:"}) {
      CHECK_THAT(r.out, Catch::Contains(heading));
    }
    CHECK_THAT(r.out, Catch::Contains("  0      every worker finished successfully"));
    CHECK_THAT(r.out, Catch::Contains("  1      a worker failed"));
    CHECK_THAT(r.out, Catch::Contains("  2      the command line was wrong"));
    CHECK_THAT(r.out, Catch::Contains("  128+N  ddprun was stopped by signal N"));
    for (const char* variable :
         {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
          "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE", "USE_LIBUV",
          "TORCHELASTIC_HEALTH_CHECK_PORT", "DDPRUN_HEALTH_CHECK_TIMEOUT",
          "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT"}) {
      CHECK_THAT(r.out, Catch::Contains(variable));
    }
    // What --logs-specs takes, what ddprun offers instead, and quoted lists.
    CHECK_THAT(r.out, Catch::Contains("cannot load") && Catch::Contains("Python plugins"));
    CHECK_THAT(r.out, Catch::Contains("\nA list or mapping value (--rdzv-endpoint, --rdzv-conf,"));
    CHECK_THAT(r.out, Catch::Contains("train ARGS"));
    CHECK_THAT(r.out, Catch::Contains("ddprun-train"));
  }
  // After the entry point --help belongs to the script: no help, no error about it.
  const Result script_help = run_ddprun({"--print-config", "--no-python", "/bin/true", "--help"});
  CHECK(script_help.status == 0);
  CHECK_THAT(script_help.out, Catch::Contains("\"worker_argv\""));
}

TEST_CASE("a signal gives the exit status --help documents: 128+N, not torchrun's 1") {
  const Result help = run_ddprun({"--help"});
  REQUIRE(help.status == 0);
  // The signal line of the exit-status list, and no other line claims signals for status 1.
  CHECK_THAT(help.out, Catch::Contains("128+N  ddprun was stopped by signal N"));
  const auto status_one = help.out.find("  1      ");
  REQUIRE(status_one != std::string::npos);
  CHECK(
      help.out.substr(status_one, help.out.find("  2 ", status_one) - status_one).find("signal") ==
      std::string::npos);
  // The behaviour: the worker sends SIGTERM to its agent, which forwards it and exits 128+15.
  const Result stopped = run_ddprun(
      {"--standalone", "--no-python", "/bin/sh", "-c", "kill -TERM $PPID; exec sleep 30"});
  CHECK(stopped.status == 128 + SIGTERM);
  CHECK_THAT(stopped.err, Catch::Contains("received SIGTERM"));
}

TEST_CASE("--numa-binding that cannot apply is refused before anything starts") {
  // CUDA_VISIBLE_DEVICES="" hides every GPU, whatever the machine has.
  const Result r = run_ddprun({"--numa-binding", "node", "--no-python", "/bin/true"},
                              {{"CUDA_VISIBLE_DEVICES", ""}});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::StartsWith("ddprun: error: --numa-binding: binds each worker near its "
                                      "GPU, but no NVIDIA GPU is visible"));
  CHECK(line_count(r.err) == 1);
}

TEST_CASE("--print-config shows torchrun's agent variables as ddprun read them") {
  const auto config = print_config({"--virtual-local-rank", "--nproc-per-node", "2", "--tee", "1",
                                    "--duplicate-stdout-filters", "loss,,acc,lr", "s.py"},
                                   {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                                    {"TORCHELASTIC_TIMER_FILE", "/run/ddprun-timer"},
                                    {"USE_LIBUV", "0"},
                                    {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "12"},
                                    {"CUDA_VISIBLE_DEVICES", "4,6"},
                                    {"OMP_NUM_THREADS", "1"}})
                          .config;
  CHECK(config["file_timer_enabled"] == true);
  CHECK(config["timer_file"] == "/run/ddprun-timer");
  CHECK(config["use_libuv"] == false);
  CHECK(config["shutdown_timeout"] == 12.0);
  CHECK(config["value_sources"]["shutdown_timeout"] == "env:TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  CHECK(config["virtual_local_rank"] == true);
  CHECK(config["duplicate_stdout_filters"] == nlohmann::json{"loss,acc", "lr"});
  CHECK(config["exit_barrier_timeout"] == 300.0);
  // More workers than CUDA_VISIBLE_DEVICES entries cannot each get one.
  const Result short_list = run_ddprun({"--virtual-local-rank", "--nproc-per-node", "3", "s.py"},
                                       {{"CUDA_VISIBLE_DEVICES", "4,6"}});
  CHECK(short_list.status == 2);
  CHECK_THAT(short_list.err,
             Catch::StartsWith("ddprun: error: --virtual-local-rank: local rank 2"));
}

TEST_CASE("train without ddprun-train beside ddprun is refused before anything starts") {
  // A copy of ddprun alone in a folder: no trainer, and no pip installation's builder.
  char folder[] = "/tmp/ddprun_cli_XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  const std::string lone = std::string(folder) + "/ddprun";
  std::filesystem::copy_file(kDdprun, lone);
  const Result r = run(lone, {"--standalone", "--nproc_per_node", "2", "train"});
  std::filesystem::remove_all(folder);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(line_count(r.err) == 1);
  CHECK_THAT(r.err, Catch::StartsWith("ddprun: error: train: " + std::string(folder) +
                                      "/ddprun-train is not installed, and there is no " +
                                      std::string(folder) +
                                      "/../share/ddprun/build_against_torch.py to build it"));
  CHECK_THAT(r.err, Catch::Contains("On a cluster, without root"));
  CHECK(r.err.find("rendezvous") == std::string::npos);  // nothing joined, nothing started
}

TEST_CASE("a pip installation's builder that cannot build stops train before anything starts") {
  // The layout pip leaves: PREFIX/bin/ddprun, PREFIX/share/ddprun/build_against_torch.py and
  // the trainer's sources. The real builder, run with Debian's python3, finds its torch 1.13
  // outside the supported range and says so; the launcher then starts nothing.
  const std::filesystem::path debian_python = "/usr/bin/python3";
  const std::filesystem::path old_torch = "/usr/lib/python3/dist-packages/torch/version.py";
  INFO("Debian's python3-torch, which scripts/install-deps.sh --tests installs");
  REQUIRE(std::filesystem::exists(debian_python));
  REQUIRE(std::filesystem::exists(old_torch));
  char folder[] = "/tmp/ddprun_cli_XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  const std::filesystem::path prefix = folder;
  const std::filesystem::path source = std::string(DDPRUN_SOURCE_DIR);
  const std::filesystem::path share = prefix / "share" / "ddprun";
  std::filesystem::create_directories(prefix / "bin");
  std::filesystem::create_directories(share / "trainer-source" / "worker-runtime");
  std::filesystem::copy_file(kDdprun, prefix / "bin" / "ddprun");
  std::filesystem::copy_file(source / "worker-runtime" / "build_against_torch.py",
                             share / "build_against_torch.py");
  std::filesystem::copy_file(source / "worker-runtime" / "CMakeLists.txt",
                             share / "trainer-source" / "worker-runtime" / "CMakeLists.txt");
  const Result r = run(
      (prefix / "bin" / "ddprun").string(), {"--standalone", "--nproc_per_node", "2", "train"},
      {{"PYTHON_EXEC", debian_python.string()}, {"DDPRUN_CACHE_DIR", (prefix / "cache").string()}});
  const bool trainer_left = std::filesystem::exists(prefix / "cache" / "trainers");
  std::filesystem::remove_all(folder);
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("ddprun: error: cannot build ddprun-train: torch 1.13"));
  CHECK_THAT(r.err, Catch::Contains("outside the range ddprun-train supports (2.13 to 2.14)"));
  CHECK_THAT(r.err, Catch::Contains("ddprun: error: train: ddprun-train could not be provided "
                                    "for /usr/bin/python3's torch"));
  CHECK(line_count(r.err) == 2);
  CHECK_FALSE(trainer_left);  // refused before the cache was touched
  CHECK(r.err.find("rendezvous") == std::string::npos);
}

TEST_CASE("--version") {
  const Result r = run_ddprun({"--version"});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::StartsWith("ddprun "));
}

TEST_CASE("--print-config prints the resolved configuration as JSON and starts nothing") {
  const auto [config, err] =
      print_config({"--nnodes=1:3", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", "[::1]:4000", "train", "--max-iters", "5"},
                   {{"PET_MAX_RESTARTS", "2"}});
  CHECK(config["min_nodes"] == 1);
  CHECK(config["max_nodes"] == 3);
  CHECK(config["nproc_per_node"] == 2);
  CHECK(config["rdzv_host"] == "::1");
  CHECK(config["rdzv_port"] == 4000);
  CHECK(config["max_restarts"] == 2);
  CHECK(config["entry_kind"] == "bundled_trainer");
  CHECK(config["worker_argv"] ==
        nlohmann::json{std::string(DDPRUN_BIN_DIR) + "/ddprun-train", "--max-iters", "5"});
  CHECK(config["worker_env_overrides"]["OMP_NUM_THREADS"] == "1");
  CHECK(config["value_sources"]["max_restarts"] == "env:PET_MAX_RESTARTS");
  CHECK(config["value_sources"]["nnodes"] == "cli");
  CHECK(config["value_sources"]["role"] == "default");
  // torchrun's OMP_NUM_THREADS banner goes to stderr, the JSON alone to stdout.
  CHECK_THAT(err, Catch::Contains("Setting OMP_NUM_THREADS environment variable for each "
                                  "process to be 1 in default"));

  CHECK(print_config({"s.py", "a"}, {{"PYTHON_EXEC", "/opt/py"}}).config["worker_argv"] ==
        nlohmann::json{"/opt/py", "-u", "s.py", "a"});
}

TEST_CASE("--print-config under Slurm shows which values came from Slurm") {
  const auto config = print_config({"train"}, {{"SLURM_JOB_ID", "77"},
                                               {"SLURM_STEP_ID", "0"},
                                               {"SLURM_STEP_NODELIST", "n[1-2]"},
                                               {"SLURM_NODEID", "0"},
                                               {"SLURMD_NODENAME", "n1"}})
                          .config;
  CHECK(config["rdzv_endpoint"] == "n1:29400");
  CHECK(config["value_sources"]["rdzv_endpoint"] == "slurm:SLURM_STEP_NODELIST");
  CHECK(config["value_sources"]["local_addr"] == "slurm:SLURMD_NODENAME");

  const Result warned = run_ddprun({"--print-config", "--nnodes", "3", "train"},
                                   {{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_NODELIST", "n[1-2]"}});
  CHECK(warned.status == 0);
  CHECK_THAT(warned.err, Catch::StartsWith("ddprun: warning: --nnodes needs at least 3 nodes"));
}

TEST_CASE("ddprun does not link LibTorch") {
  const Result r = run("/usr/bin/ldd", {kDdprun});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("libc.so"));
  CHECK_THAT(r.out, !Catch::Contains("libtorch") && !Catch::Contains("libc10"));
}
