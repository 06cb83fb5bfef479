// Every option in every spelling, PET_* defaults, precedence, and the resolution rules
// (rendezvous endpoint, --standalone, nproc, OMP_NUM_THREADS).

#include <catch2/catch.hpp>
#include <csignal>
#include <nlohmann/json.hpp>
#include <set>

#include "launcher/agent_config_builder.hpp"
#include "launcher/config_json.hpp"
#include "launcher/option_table.hpp"
#include "launcher/usage_error.hpp"
#include "launcher_test_support.hpp"

using namespace ddprun::launcher;
using namespace ddprun::launcher::testing;
using nlohmann::json;

namespace {

// One value per option, and where it must show up in --print-config's JSON.
struct OptionCase {
  std::string dest;
  std::string value;  // ignored for flags
  std::string field;  // JSON pointer into launch_config_to_json
  json expected;
};

std::vector<OptionCase> option_cases() {
  return {
      {"nnodes", "2:4", "/max_nodes", 4},
      {"nproc_per_node", "3", "/nproc_per_node", 3},
      {"rdzv_backend", "c10d", "/rdzv_backend", "c10d"},
      {"rdzv_endpoint", "node1:1234", "/rdzv_port", 1234},
      {"rdzv_id", "job7", "/rdzv_id", "job7"},
      {"rdzv_conf", "join_timeout=5,is_host=yes", "/rdzv_conf",
       json{{"is_host", "yes"}, {"join_timeout", "5"}}},
      {"standalone", "", "/standalone", true},
      {"max_restarts", "3", "/max_restarts", 3},
      {"monitor_interval", "0.5", "/monitor_interval", 0.5},
      {"start_method", "fork", "/start_method", "fork"},
      {"event_log_handler", "console", "/event_log_handler", "console"},
      {"role", "trainer", "/role", "trainer"},
      {"module", "", "/entry_kind", "python_module"},
      {"no_python", "", "/entry_kind", "binary"},
      {"run_path", "", "/run_path", true},
      {"log_dir", "/tmp/logs", "/log_dir", "/tmp/logs"},
      {"redirects", "3", "/redirects/all", 3},
      {"tee", "0:1,1:2", "/tee/per_local_rank", json{{"0", 1}, {"1", 2}}},
      {"local_ranks_filter", "2,0", "/local_ranks_filter", json{0, 2}},
      {"duplicate_stdout_filters", "apple,,pie,orange", "/duplicate_stdout_filters",
       json{"apple,pie", "orange"}},
      {"duplicate_stderr_filters", "oops", "/duplicate_stderr_filters", json{"oops"}},
      {"node_rank", "0", "/node_rank_hint", 0},
      {"master_addr", "10.0.0.1", "/master_addr", "10.0.0.1"},
      {"master_port", "1234", "/master_port", 1234},
      {"local_addr", "me.example", "/local_addr", "me.example"},
      {"logs_specs", "default", "/logs_specs", "default"},
      {"numa_binding", "socket", "/numa_binding", "socket"},
      {"signals_to_handle", "SIGUSR1,SIGTERM", "/signals_to_handle", json{SIGUSR1, SIGTERM}},
      {"shutdown_timeout", "12", "/shutdown_timeout", 12.0},
      {"recovery", "live", "/recovery", "live"},
      {"virtual_local_rank", "", "/virtual_local_rank", true},
      {"events_file", "/tmp/events.jsonl", "/events_file", "/tmp/events.jsonl"},
      {"exit_barrier_timeout", "60", "/exit_barrier_timeout", 60.0},
      {"watchdog_timeout", "2.5", "/watchdog_timeout", 2.5},
      {"straggler_factor", "1.5", "/straggler_factor", 1.5},
      {"straggler_window", "30", "/straggler_window", 30.0},
      {"health_check", "test -w /tmp", "/health_check", "test -w /tmp"},
      {"health_check_timeout", "5", "/health_check_timeout", 5.0},
      {"health_check_interval", "2", "/health_check_interval", 2.0},
  };
}

// Every way the option can be written on a command line.
std::vector<std::vector<std::string>> spellings(const OptionCase& c) {
  const auto* spec = find_option(c.dest);
  REQUIRE(spec != nullptr);
  std::vector<std::string> names{"--" + std::string(spec->dest)};
  if (!spec->dashed.empty())
    names.push_back("--" + std::string(spec->dashed));
  std::vector<std::vector<std::string>> forms;
  for (const auto& name : names) {
    if (spec->kind == OptionKind::kFlag) {
      forms.push_back({name});
    } else {
      forms.push_back({name, c.value});
      forms.push_back({name + "=" + c.value});
    }
  }
  if (spec->short_name != '\0') {
    const std::string short_name = std::string("-") + spec->short_name;
    if (spec->kind == OptionKind::kFlag) {
      forms.push_back({short_name});
    } else {
      forms.push_back({short_name, c.value});
      forms.push_back({short_name + c.value});
    }
  }
  return forms;
}

json resolved_json(std::vector<std::string> args, const Environment& env = {}) {
  args.push_back("script.py");
  return launch_config_to_json(resolve(args, env).config);
}

}  // namespace

TEST_CASE("every option is accepted in each of its spellings") {
  for (const auto& c : option_cases()) {
    for (const auto& form : spellings(c)) {
      INFO("option " << c.dest << " written as " << form.front());
      const json config = resolved_json(form);
      CHECK(config.at(json::json_pointer(c.field)) == c.expected);
      CHECK(config["value_sources"][c.dest] == "cli");
    }
  }
}

TEST_CASE("the test's case list covers every torchrun option of the table") {
  std::size_t covered = 0;
  for (const auto& spec : ddprun::launcher::option_table()) {
    const std::string dest(spec.dest);
    if (dest == "help" || dest == "version" || dest == "print_config")
      continue;
    const auto cases = option_cases();
    INFO(dest);
    CHECK(std::any_of(cases.begin(), cases.end(), [&](const auto& c) { return c.dest == dest; }));
    ++covered;
  }
  CHECK(covered == option_cases().size());
}

TEST_CASE("PET_* variables supply defaults and the command line wins") {
  for (const auto& c : option_cases()) {
    const auto* spec = find_option(c.dest);
    if (!spec->reads_pet || c.dest == "standalone")
      continue;
    const std::string variable = ddprun::launcher::pet_variable(c.dest);
    INFO(variable);
    const Environment env{{variable, spec->kind == OptionKind::kFlag ? "1" : c.value}};
    const json from_env = resolved_json({}, env);
    CHECK(from_env.at(json::json_pointer(c.field)) == c.expected);
    CHECK(from_env["value_sources"][c.dest] == "env:" + variable);
  }
  // The command line wins over the environment.
  const Environment env{{"PET_NNODES", "5"}, {"PET_MAX_RESTARTS", "7"}, {"PET_ROLE", "env"}};
  const json config = resolved_json({"--nnodes", "2", "--max-restarts=1"}, env);
  CHECK(config["max_nodes"] == 2);
  CHECK(config["max_restarts"] == 1);
  CHECK(config["role"] == "env");
  CHECK(config["value_sources"]["nnodes"] == "cli");
  CHECK(config["value_sources"]["role"] == "env:PET_ROLE");
  CHECK_FALSE(config["value_sources"].contains("max_nodes"));
}

TEST_CASE("boolean flags read PET_X=0/1 and the command line turns them on") {
  CHECK(resolved_json({}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}})["virtual_local_rank"] == true);
  CHECK(resolved_json({}, {{"PET_VIRTUAL_LOCAL_RANK", "0"}})["virtual_local_rank"] == false);
  CHECK(resolved_json({}, {{"PET_STANDALONE", "1"}})["rdzv_backend"] == "c10d");
  CHECK(resolved_json({}, {{"PET_STANDALONE", "0"}})["rdzv_backend"] == "static");
  CHECK(resolved_json({"--standalone"}, {{"PET_STANDALONE", "0"}})["standalone"] == true);
  CHECK(resolved_json({}, {{"PET_NO_PYTHON", "1"}})["entry_kind"] == "binary");
  CHECK(resolved_json({}, {{"PET_MODULE", "1"}})["entry_kind"] == "python_module");
  CHECK_THROWS_WITH(resolved_json({}, {{"PET_STANDALONE", "true"}}),
                    Catch::Contains("PET_STANDALONE") && Catch::Contains("expected 0 or 1"));
}

TEST_CASE("defaults match torchrun") {
  const json config = resolved_json({});
  CHECK(config["min_nodes"] == 1);
  CHECK(config["max_nodes"] == 1);
  CHECK(config["nproc_per_node"] == 1);
  CHECK(config["rdzv_backend"] == "static");
  CHECK(config["rdzv_id"] == "none");
  CHECK(config["rdzv_host"] == "127.0.0.1");
  CHECK(config["rdzv_port"] == 29500);
  CHECK(config["max_restarts"] == 0);
  CHECK(config["monitor_interval"] == 0.1);
  CHECK(config["start_method"] == "spawn");
  CHECK(config["role"] == "default");
  CHECK(config["event_log_handler"] == "null");
  CHECK(config["shutdown_timeout"] == 30.0);
  CHECK(config["exit_barrier_timeout"] == 300.0);
  CHECK(config["signals_to_handle"] == json{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(config["signals_to_handle_text"] == "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  CHECK(config["redirects"]["all"] == 0);
  CHECK(config["log_dir"].is_null());
  CHECK(config["node_rank_hint"].is_null());
  CHECK(config["local_addr"].is_null());
  CHECK(config["worker_env_overrides"].empty());
  CHECK(config["value_sources"]["nnodes"] == "default");
  CHECK(config["numa_binding"].is_null());
  CHECK(config["numa_cpus"].empty());
  CHECK(config["file_timer_enabled"] == false);
  CHECK(config["timer_file"].is_null());
  CHECK(config["use_libuv"] == true);
  CHECK(config["watchdog_timeout"].is_null());
  CHECK(config["straggler_factor"] == 2.0);
  CHECK(config["straggler_window"] == 60.0);
}

TEST_CASE("options after the entry point belong to the script") {
  const auto resolved =
      resolve({"--nnodes", "2", "train.py", "--nnodes", "5", "-m", "--help", "--", "x"});
  CHECK(resolved.config.max_nodes == 2);
  CHECK(resolved.config.entry_point == "train.py");
  CHECK(resolved.config.entry_args ==
        std::vector<std::string>{"--nnodes", "5", "-m", "--help", "--", "x"});
  CHECK(resolved.config.entry_kind == ddprun::launcher::EntryKind::kPythonScript);

  const auto after_dashes = resolve({"--max_restarts", "1", "--", "--weird-name.py", "a"});
  CHECK(after_dashes.config.entry_point == "--weird-name.py");
  CHECK(after_dashes.config.entry_args == std::vector<std::string>{"a"});
}

TEST_CASE("argparse conveniences: last value wins, unambiguous abbreviations") {
  CHECK(resolve({"--nnodes", "2", "--nnodes", "3", "s.py"}).config.max_nodes == 3);
  CHECK(resolve({"--nproc", "2", "s.py"}).config.nproc_per_node == 2);
  CHECK(resolve({"--standalone", "--standalone", "s.py"}).config.standalone);
  CHECK_THROWS_WITH(resolve({"--rdzv", "x", "s.py"}), Catch::Contains("ambiguous"));
}

TEST_CASE("rendezvous endpoint resolution") {
  SECTION("static without an endpoint uses master_addr:master_port") {
    const auto c = resolve({"--master_addr", "head", "--master-port", "4000", "s.py"}).config;
    CHECK(c.rdzv_host == "head");
    CHECK(c.rdzv_port == 4000);
    CHECK(c.rdzv_endpoint.empty());
  }
  SECTION("c10d's default port is 29400") {
    const auto c = resolve({"--rdzv_backend", "c10d", "--rdzv_endpoint", "node7", "s.py"}).config;
    CHECK(c.rdzv_host == "node7");
    CHECK(c.rdzv_port == 29400);
  }
  SECTION("IPv6 in brackets, with and without a port") {
    auto c = resolve({"--rdzv-backend=c10d", "--rdzv-endpoint=[::1]:5000", "s.py"}).config;
    CHECK(c.rdzv_host == "::1");
    CHECK(c.rdzv_port == 5000);
    c = resolve({"--rdzv-backend=c10d", "--rdzv-endpoint=[fe80::2]", "s.py"}).config;
    CHECK(c.rdzv_host == "fe80::2");
    CHECK(c.rdzv_port == 29400);
  }
  SECTION("static with an endpoint needs a port") {
    CHECK_THROWS_WITH(resolve({"--rdzv_endpoint", "node7", "s.py"}),
                      Catch::Contains("--rdzv_endpoint") && Catch::Contains("needs a port"));
    CHECK(resolve({"--rdzv_endpoint", "node7:1", "s.py"}).config.rdzv_port == 1);
  }
  SECTION("c10d without an endpoint warns that master_addr is unused, as torchrun does") {
    const auto r = resolve({"--rdzv_backend", "c10d", "s.py"});
    CHECK(r.config.rdzv_host == "localhost");
    REQUIRE(r.warnings.size() == 1);
    CHECK(r.warnings[0] ==
          "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not "
          "specified.");
  }
  SECTION("--standalone forces c10d on localhost:0 with a fresh id") {
    const auto r = resolve({"--standalone", "--rdzv_backend", "static", "--rdzv_id", "mine",
                            "--rdzv_endpoint", "far:1", "s.py"});
    CHECK(r.config.rdzv_backend == "c10d");
    CHECK(r.config.rdzv_endpoint == "localhost:0");
    CHECK(r.config.rdzv_host == "localhost");
    CHECK(r.config.rdzv_port == 0);
    CHECK(r.config.rdzv_id == test_machine().fresh_run_id);
    CHECK(r.config.value_sources.at("rdzv_id") == "standalone");
    CHECK(r.warnings.empty());
  }
  SECTION("unsupported backends are refused up front") {
    CHECK_THROWS_WITH(
        resolve({"--rdzv_backend", "zookeeper", "s.py"}),
        Catch::Contains("--rdzv_backend") && Catch::Contains("static|c10d|etcd|etcd-v2|etcd-v3"));
  }
  SECTION("etcd: torchrun's three names are one backend; the members are checked here, once") {
    for (const char* name : {"etcd", "etcd-v2", "etcd-v3"}) {
      auto r = resolve({"--nnodes", "1:3", "--rdzv_backend", name, "--rdzv_endpoint",
                        "n1:2379,n2,[::1]:23790", "--rdzv_id", "job", "--rdzv_conf",
                        "etcd_prefix=/team/a/,protocol=http", "s.py"});
      CHECK(r.config.rdzv_backend == "etcd");
      REQUIRE(r.config.etcd.has_value());
      CHECK(r.config.etcd->endpoints.size() == 3);
      CHECK(r.config.etcd->endpoints[1].port == 2379);
      CHECK(r.config.etcd->key_prefix == "/team/a/");
      CHECK_FALSE(r.config.etcd->tls.enabled);
      CHECK(r.config.rdzv_host == "n1");
    }
    // The default prefix: a run's keys are /ddprun/rdzv/<id>/...
    CHECK(resolve({"--rdzv_backend", "etcd", "--rdzv_endpoint", "n1", "s.py"})
              .config.etcd->key_prefix == "/");
    CHECK_THROWS_WITH(resolve({"--rdzv_backend", "etcd", "s.py"}),
                      Catch::Contains("--rdzv_endpoint") && Catch::Contains("etcd members"));
    CHECK_THROWS_WITH(resolve({"--rdzv_backend", "etcd", "--rdzv_endpoint", "n1:2379,,n2", "s.py"}),
                      Catch::Contains("--rdzv_endpoint: empty entry"));
    // Each bad etcd --rdzv_conf entry, and what the message must name.
    const std::pair<const char*, std::vector<const char*>> bad_confs[] = {
        {"etcd_prefix=rel/../x", {"--rdzv_conf", "etcd_prefix"}},
        {"etcd_prefix=/a/../b", {".. segment"}},
        {"protocol=gopher", {"protocol", "http|https"}},
        {"cert=c.pem", {"protocol=https"}},
    };
    for (const auto& [conf, needles] : bad_confs) {
      INFO(conf);
      try {
        resolve({"--rdzv_backend", "etcd", "--rdzv_endpoint", "n1", "--rdzv_conf", conf, "s.py"});
        FAIL("accepted");
      } catch (const std::exception& error) {
        for (const char* needle : needles) {
          CHECK_THAT(error.what(), Catch::Contains(needle));
        }
      }
    }
  }
}

TEST_CASE("node_rank_hint is set only when a node rank is given") {
  CHECK_FALSE(resolve({"s.py"}).config.node_rank_hint.has_value());
  CHECK(resolve({"--nnodes", "3", "--node-rank", "2", "s.py"}).config.node_rank_hint == 2);
  CHECK(resolve({"--nnodes", "3", "s.py"}, {{"PET_NODE_RANK", "1"}}).config.node_rank_hint == 1);
  CHECK_THROWS_WITH(resolve({"--nnodes", "2", "--node_rank", "2", "s.py"}),
                    Catch::Contains("--node_rank") && Catch::Contains("0 to 1"));
}

TEST_CASE("--nproc-per-node: integers, cpu, gpu and auto") {
  auto machine = test_machine();
  CHECK(resolve({"--nproc_per_node", "cpu", "s.py"}, {}, machine).config.nproc_per_node == 8);
  CHECK(resolve({"--nproc_per_node", "auto", "s.py"}, {}, machine).config.nproc_per_node == 8);
  CHECK_THROWS_WITH(resolve({"--nproc_per_node", "gpu", "s.py"}, {}, machine),
                    Catch::Contains("--nproc_per_node") && Catch::Contains("no NVIDIA GPU"));
  machine.nvidia_gpu_count = 4;
  CHECK(resolve({"--nproc_per_node", "gpu", "s.py"}, {}, machine).config.nproc_per_node == 4);
  CHECK(resolve({"--nproc_per_node", "auto", "s.py"}, {}, machine).config.nproc_per_node == 4);
  CHECK(resolve({"--nproc_per_node", "gpu", "s.py"}, {{"CUDA_VISIBLE_DEVICES", "2,3"}}, machine)
            .config.nproc_per_node == 2);
  CHECK_THROWS_WITH(
      resolve({"--nproc_per_node", "gpu", "s.py"}, {{"CUDA_VISIBLE_DEVICES", ""}}, machine),
      Catch::Contains("CUDA_VISIBLE_DEVICES=''"));
  CHECK_THROWS_WITH(resolve({"--nproc_per_node", "0", "s.py"}), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(resolve({"--nproc_per_node", "xpu", "s.py"}), Catch::Contains("xpu"));
}

TEST_CASE("OMP_NUM_THREADS: set to 1 with a warning when unset and nproc > 1") {
  const auto two = resolve({"--nproc-per-node", "2", "s.py"});
  CHECK(two.config.worker_env_overrides.at("OMP_NUM_THREADS") == "1");
  REQUIRE(two.warnings.size() == 1);
  CHECK(two.warnings[0] ==
        "\n*****************************************\n"
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
        "avoid your system being overloaded, please further tune the variable for optimal "
        "performance in your application as needed. \n"
        "*****************************************");
  const auto user_set = resolve({"--nproc-per-node", "2", "s.py"}, {{"OMP_NUM_THREADS", "4"}});
  CHECK(user_set.config.worker_env_overrides.empty());
  CHECK(user_set.warnings.empty());
  CHECK(resolve({"s.py"}).warnings.empty());
}

TEST_CASE("--recovery live warns that a script worker must follow the protocol to take part") {
  const auto script = resolve({"--recovery", "live", "s.py"});
  CHECK(script.config.live_recovery);
  REQUIRE(script.warnings.size() == 1);
  CHECK_THAT(script.warnings[0],
             Catch::StartsWith("--recovery live: s.py is not ddprun's trainer"));
  CHECK_THAT(script.warnings[0], Catch::Contains("restarted on a lost or joining node"));
  CHECK(!resolve({"s.py"}).config.live_recovery);
  CHECK(resolve({"--recovery", "restart", "s.py"}).warnings.empty());
}

TEST_CASE("shutdown timeout falls back to TORCH_ELASTIC_SHUTDOWN_TIMEOUT") {
  const auto c = resolve({"s.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}}).config;
  CHECK(c.shutdown_timeout == ddprun::common::Seconds(7));
  CHECK(c.value_sources.at("shutdown_timeout") == "env:TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  CHECK(resolve({"--shutdown-timeout", "3", "s.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}})
            .config.shutdown_timeout == ddprun::common::Seconds(3));
}

TEST_CASE("torchrun's agent variables: file timer and USE_LIBUV, as torchrun 2.13 reads them") {
  // TORCHELASTIC_ENABLE_FILE_TIMER=1 (exactly "1") enables the watchdog; its pipe is
  // TORCHELASTIC_TIMER_FILE when given (the agent makes one per start otherwise).
  auto c = resolve({"s.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}).config;
  CHECK(c.file_timer_enabled);
  CHECK_FALSE(c.timer_file);
  CHECK(c.value_sources.at("file_timer_enabled") == "env:TORCHELASTIC_ENABLE_FILE_TIMER");
  c = resolve({"s.py"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "true"}}).config;
  CHECK_FALSE(c.file_timer_enabled);
  CHECK_FALSE(c.timer_file);
  c = resolve({"s.py"},
              {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TORCHELASTIC_TIMER_FILE", "/run/timer"}})
          .config;
  CHECK(c.timer_file == "/run/timer");
  // Given without the switch, the path still reaches the workers (torchrun passes it on).
  CHECK(resolve({"s.py"}, {{"TORCHELASTIC_TIMER_FILE", "/run/t"}}).config.timer_file == "/run/t");
  CHECK(resolve({"s.py"}).config.use_libuv);
  CHECK_FALSE(resolve({"s.py"}, {{"USE_LIBUV", "0"}}).config.use_libuv);
  CHECK_FALSE(resolve({"s.py"}, {{"USE_LIBUV", "yes"}}).config.use_libuv);  // only "1" is on
  CHECK(resolve({"s.py"}, {{"USE_LIBUV", "0"}}).config.value_sources.at("use_libuv") ==
        "env:USE_LIBUV");
}

TEST_CASE("--health-check: off by default; on, the agent checks before each join") {
  auto c = resolve({"s.py"}).config;
  CHECK_FALSE(c.node_check_command);
  CHECK(c.node_check_timeout == ddprun::common::Seconds(60));
  CHECK(c.node_check_interval == ddprun::common::Seconds(30));
  auto agent = ddprun::launcher::build_agent_config(c);
  CHECK_FALSE(agent.node_check.command);
  CHECK_FALSE(agent.rendezvous.node_check_interval);  // the round machine never asks

  c = resolve({"--health-check-timeout", "7", "s.py"},
              {{"PET_HEALTH_CHECK", "nvidia-smi -L"}, {"PET_HEALTH_CHECK_INTERVAL", "4.5"}})
          .config;
  CHECK(c.value_sources.at("health_check") == "env:PET_HEALTH_CHECK");
  agent = ddprun::launcher::build_agent_config(c);
  CHECK(agent.node_check.command == "nvidia-smi -L");
  CHECK(agent.node_check.timeout == ddprun::common::Seconds(7));
  CHECK(agent.rendezvous.node_check_interval == ddprun::common::Seconds(4.5));
}

TEST_CASE("TORCHELASTIC_HEALTH_CHECK_PORT and DDPRUN_HEALTH_CHECK_TIMEOUT: checked once, here") {
  auto c = resolve({"s.py"}).config;
  CHECK_FALSE(c.health_port);
  CHECK(c.health_port_stale_after == ddprun::common::Seconds(60));  // torchrun passes 60
  CHECK(c.value_sources.at("health_check_port") == "default");
  c = resolve({"s.py"},
              {{"TORCHELASTIC_HEALTH_CHECK_PORT", "8080"}, {"DDPRUN_HEALTH_CHECK_TIMEOUT", "2.5"}})
          .config;
  CHECK(c.health_port == 8080);
  CHECK(c.health_port_stale_after == ddprun::common::Seconds(2.5));
  CHECK(c.value_sources.at("health_check_port") == "env:TORCHELASTIC_HEALTH_CHECK_PORT");
  CHECK(c.value_sources.at("health_server_timeout") == "env:DDPRUN_HEALTH_CHECK_TIMEOUT");
  CHECK(ddprun::launcher::build_agent_config(c).health_port.port == 8080);
  CHECK(ddprun::launcher::build_agent_config(c).health_port.stale_after ==
        ddprun::common::Seconds(2.5));
  for (const char* bad : {"", "http", "0", "65536", "-1", "80.5"}) {
    INFO(bad);
    CHECK_THROWS_WITH(resolve({"s.py"}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", bad}}),
                      Catch::StartsWith("TORCHELASTIC_HEALTH_CHECK_PORT: ") &&
                          Catch::EndsWith("a TCP port from 1 to 65535"));
  }
  CHECK_THROWS_WITH(resolve({"s.py"}, {{"DDPRUN_HEALTH_CHECK_TIMEOUT", "0"}}),
                    Catch::StartsWith("DDPRUN_HEALTH_CHECK_TIMEOUT: "));
}

TEST_CASE(
    "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: the wait after SIGKILL, checked once, here") {
  using ddprun::common::Seconds;
  auto c = resolve({"s.py"}).config;
  CHECK(c.uninterruptible_state_timeout == Seconds(60));
  CHECK(c.value_sources.at("uninterruptible_state_timeout") == "default");
  CHECK(ddprun::launcher::build_agent_config(c).supervision.reap_after_kill_limit == Seconds(60));
  c = resolve({"s.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", " 2.5 "}}).config;
  CHECK(c.uninterruptible_state_timeout == Seconds(2.5));
  CHECK(c.value_sources.at("uninterruptible_state_timeout") ==
        "env:TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT");
  CHECK(ddprun::launcher::build_agent_config(c).supervision.reap_after_kill_limit == Seconds(2.5));
  // torchrun's "off" (empty or 0) keeps ddprun's bound: it never waits without one.
  for (const char* off : {"", "0", "0.0"}) {
    INFO(off);
    CHECK(resolve({"s.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", off}})
              .config.uninterruptible_state_timeout == Seconds(60));
  }
  for (const char* bad : {"soon", "-1", "1e9", "30s", "nan"}) {
    INFO(bad);
    CHECK_THROWS_WITH(resolve({"s.py"}, {{"TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", bad}}),
                      Catch::StartsWith("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: ") &&
                          Catch::EndsWith("a number of seconds, 0 or more, at most 1e7"));
  }
}

TEST_CASE("--virtual-local-rank needs a CUDA_VISIBLE_DEVICES entry per worker, if it is set") {
  CHECK(
      resolve({"--virtual-local-rank", "--nproc-per-node", "3", "s.py"}).config.virtual_local_rank);
  CHECK(resolve({"--virtual-local-rank", "--nproc-per-node", "2", "s.py"},
                {{"CUDA_VISIBLE_DEVICES", "3,5"}})
            .config.virtual_local_rank);
  CHECK_THROWS_WITH(resolve({"--virtual-local-rank", "--nproc-per-node", "3", "s.py"},
                            {{"CUDA_VISIBLE_DEVICES", "3,5"}}),
                    Catch::StartsWith("--virtual-local-rank: local rank 2 has no device in "
                                      "CUDA_VISIBLE_DEVICES='3,5'"));
}

TEST_CASE("--duplicate-*-filters copy tee'd streams into log files") {
  const auto teed = resolve({"--tee", "1", "--duplicate-stdout-filters", "loss", "s.py"});
  CHECK(teed.config.logs.duplicate_stdout_filters == std::vector<std::string>{"loss"});
  CHECK(teed.warnings.empty());
  // torchrun copies only what it tails: without --tee nothing would ever be copied.
  const auto untouched = resolve({"--tee", "1", "--duplicate-stderr-filters", "warn", "s.py"});
  REQUIRE(untouched.warnings.size() == 1);
  CHECK(untouched.warnings[0] ==
        "--duplicate-stderr-filters copies lines of --tee'd stderr only, and --tee does not "
        "include stderr: nothing will be copied");
  // torchrun fails opening /dev/null/filtered_stdout.log; ddprun says why before starting.
  CHECK_THROWS_WITH(
      resolve({"--tee", "3", "--log-dir", "/dev/null", "--duplicate-stdout-filters", "a", "s.py"}),
      Catch::StartsWith("--duplicate-stdout-filters: copies lines to") &&
          Catch::Contains("--log-dir /dev/null turns log files off"));
}

TEST_CASE("bad values name the option as the user wrote it") {
  const auto message = [](std::vector<std::string> args, const Environment& env = {}) {
    try {
      args.push_back("s.py");
      resolve(args, env);
    } catch (const UsageError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message({"--nnodes", "3:2"}), Catch::StartsWith("--nnodes: '3:2' has MIN greater"));
  CHECK_THAT(message({"--nnodes", "0"}), Catch::StartsWith("--nnodes: '0' has MIN below 1"));
  CHECK_THAT(message({"--nnodes", "1:2:3"}), Catch::StartsWith("--nnodes: '1:2:3' has more"));
  CHECK_THAT(message({}, {{"PET_NNODES", "x"}}),
             Catch::StartsWith("--nnodes (from PET_NNODES): 'x'"));
  CHECK_THAT(message({"--max_restarts", "-1"}), Catch::StartsWith("--max_restarts: '-1'"));
  CHECK_THAT(message({"-r", "0:4"}), Catch::StartsWith("-r: '0:4'"));
  CHECK_THAT(message({"--tee=10:1"}), Catch::StartsWith("--tee: '10:1'"));
  CHECK_THAT(message({"--monitor-interval", "0"}), Catch::StartsWith("--monitor-interval"));
  CHECK_THAT(message({"--start_method", "thread"}), Catch::Contains("spawn|fork|forkserver"));
  CHECK_THAT(message({"--numa_binding", "all"}), Catch::Contains("core-complex"));
  CHECK_THAT(message({"--recovery", "hot"}), Catch::Contains("restart|live"));
  CHECK_THAT(message({}, {{"PET_RECOVERY", "hot"}}),
             Catch::StartsWith("--recovery (from PET_RECOVERY): 'hot'"));
  CHECK_THAT(message({"--signals_to_handle", "SIGFOO"}), Catch::Contains("'SIGFOO'"));
  CHECK_THAT(message({"--signals_to_handle", "SIGKILL"}), Catch::Contains("cannot be caught"));
  CHECK_THAT(message({"--rdzv_conf", "join_timeout=soon"}),
             Catch::StartsWith("--rdzv_conf join_timeout: 'soon' is not a number"));
  CHECK_THAT(message({"--rdzv_conf", "is_host=maybe"}), Catch::Contains("yes, y or 0"));
  CHECK_THAT(message({"--local_ranks_filter", "0,a"}), Catch::StartsWith("--local_ranks_filter"));
  CHECK_THAT(message({"--master_port", "70000"}), Catch::StartsWith("--master_port"));
  CHECK_THAT(message({"--events-file="}), Catch::StartsWith("--events-file: empty"));
  CHECK_THAT(message({"--watchdog-timeout", "0"}),
             Catch::StartsWith("--watchdog-timeout: '0' is out of range"));
  CHECK_THAT(message({"--watchdog_timeout", "-3"}), Catch::StartsWith("--watchdog_timeout: '-3'"));
  CHECK(message({"--straggler-factor", "0.5"}) ==
        "--straggler-factor: '0.5' is not a factor; expected 0 (off) or a number from 1 to 1000, "
        "e.g. 2");
  CHECK_THAT(message({"--straggler-window", "0"}), Catch::StartsWith("--straggler-window: '0'"));
  CHECK_THAT(
      message({"--watchdog-timeout", "soon"}),
      Catch::Contains("'soon' is not a number; expected a number of seconds greater than 0"));
  CHECK_THAT(message({"--watchdog-timeout", "1e300"}),
             Catch::StartsWith("--watchdog-timeout: '1e300' is out of range"));
  CHECK_THAT(message({}, {{"PET_WATCHDOG_TIMEOUT", "nan"}}),
             Catch::StartsWith("--watchdog-timeout (from PET_WATCHDOG_TIMEOUT)"));
  CHECK_THAT(message({"--health-check", " "}), Catch::StartsWith("--health-check: empty"));
  CHECK_THAT(message({"--health-check-interval", "0"}),
             Catch::StartsWith("--health-check-interval: '0' is out of range"));
  CHECK_THAT(message({"--health_check_timeout", "-1"}),
             Catch::StartsWith("--health_check_timeout: '-1'"));
}

TEST_CASE("a list or mapping value wrapped whole in quotes is read without them, CLI and PET_*") {
  // The options whose value is a list or a mapping, written out here on purpose: the table
  // marks them kList, and the test must not be generated from it.
  const std::set<std::string> lists{"rdzv_endpoint",
                                    "rdzv_conf",
                                    "signals_to_handle",
                                    "redirects",
                                    "tee",
                                    "local_ranks_filter",
                                    "duplicate_stdout_filters",
                                    "duplicate_stderr_filters"};
  for (const auto& spec : ddprun::launcher::option_table()) {
    INFO(spec.dest);
    CHECK((spec.kind == OptionKind::kList) == lists.contains(std::string(spec.dest)));
  }
  std::size_t checked = 0;
  for (const auto& c : option_cases()) {
    if (!lists.contains(c.dest))
      continue;
    ++checked;
    for (const std::string quote : {"'", "\""}) {
      OptionCase wrapped = c;
      wrapped.value = quote + c.value + quote;
      for (const auto& form : spellings(wrapped)) {
        INFO("option " << c.dest << " written as " << form.front() << " " << wrapped.value);
        CHECK(resolved_json(form).at(json::json_pointer(c.field)) == c.expected);
      }
      INFO(pet_variable(c.dest) << "=" << wrapped.value);
      CHECK(resolved_json({}, {{pet_variable(c.dest), "  " + wrapped.value + " "}})
                .at(json::json_pointer(c.field)) == c.expected);
    }
  }
  CHECK(checked == lists.size());

  // The command line of the issue, as Python's subprocess.run hands it over.
  const auto conf =
      resolve({"--rdzv-conf='join_timeout=5,last_call_timeout=1,timeout=5'", "s.py"}).config;
  CHECK(conf.rdzv_settings.join_timeout.count() == 5);
  CHECK(conf.rdzv_settings.last_call_timeout.count() == 1);
  CHECK(conf.rdzv_conf.at("timeout") == "5");
  // Quotes inside the list are the value's own; '' is an empty list.
  CHECK(resolve({"--rdzv-conf", "a='1',b=2", "s.py"}).config.rdzv_conf.at("a") == "'1'");
  CHECK(resolve({"--local-ranks-filter", "''", "s.py"}).config.logs.local_ranks_filter.empty());
}

TEST_CASE("anything but a whole quoted list keeps the strict checks and their messages") {
  const auto message = [](std::vector<std::string> args) {
    args.push_back("s.py");
    try {
      resolve(args);
    } catch (const UsageError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  // Unbalanced or mismatched quotes, and a second pair: read as written.
  CHECK_THAT(message({"--rdzv-conf", "join_timeout=5'"}),
             Catch::StartsWith("--rdzv-conf join_timeout: '5'' is not a number"));
  CHECK_THAT(message({"-r", "'0:1,1:2\""}),
             Catch::StartsWith("-r: ''0:1,1:2\"' is not a stream value"));
  CHECK_THAT(message({"--local-ranks-filter", "''0''"}),
             Catch::StartsWith("--local-ranks-filter: ''0'' is not an integer"));
  CHECK_THAT(message({"--tee", "'"}), Catch::StartsWith("--tee: '''"));
  // Single values are not lists: their quotes stay, and so do the errors.
  CHECK_THAT(message({"--nnodes", "'2'"}), Catch::StartsWith("--nnodes: ''2'' is not a node"));
  CHECK_THAT(message({"--max-restarts", "\"1\""}),
             Catch::StartsWith("--max-restarts: '\"1\"' is not an integer"));
  CHECK(resolve({"--role", "'x'", "s.py"}).config.role == "'x'");
  // A quoted list is then checked as any list.
  CHECK_THAT(message({"--redirects", "'0:4'"}), Catch::StartsWith("--redirects: '0:4' has stream"));
}

TEST_CASE("logs specs: default, torch's one shipped name, runs; any other is refused") {
  CHECK(resolve({"--logs-specs", "default", "s.py"}).config.logs_specs == "default");
  CHECK_FALSE(resolve({"s.py"}).config.logs_specs.has_value());
  for (const char* bad : {"DOESNOT_EXIST", "", "Default", " default"}) {
    INFO("--logs_specs '" << bad << "'");
    CHECK_THROWS_WITH(resolve({"--logs_specs", bad, "s.py"}),
                      Catch::StartsWith("--logs_specs: '") &&
                          Catch::Contains("ddprun cannot load") &&
                          Catch::Contains("expected default") && Catch::Contains("--log-dir") &&
                          Catch::Contains("--tee") && Catch::Contains("--redirects") &&
                          Catch::Contains("--local-ranks-filter") &&
                          Catch::Contains("--duplicate-stdout-filters"));
  }
  // torchrun 2.13 reads no PET_LOGS_SPECS and starts with its default layout; ddprun too, and
  // says so.
  const auto from_env = resolve({"s.py"}, {{"PET_LOGS_SPECS", "DOESNOT_EXIST"}});
  CHECK_FALSE(from_env.config.logs_specs.has_value());
  REQUIRE(from_env.warnings.size() == 1);
  CHECK_THAT(from_env.warnings[0],
             Catch::StartsWith("PET_LOGS_SPECS='DOESNOT_EXIST' is not read") &&
                 Catch::Contains("cannot load"));
  CHECK(resolve({"s.py"}, {{"PET_LOGS_SPECS", "default"}}).warnings.empty());
}
