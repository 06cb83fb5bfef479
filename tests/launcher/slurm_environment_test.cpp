// Zero configuration under Slurm: defaults from srun's environment, precedence, warnings.

#include "launcher/slurm_environment.hpp"

#include <catch2/catch.hpp>

#include "launcher/usage_error.hpp"
#include "launcher_test_support.hpp"

using namespace ddprun::launcher;
using namespace ddprun::launcher::testing;

namespace {

// What `srun -N2 --ntasks-per-node=1 --gres=gpu:4` gives the task on the second node of a
// three-node allocation.
Environment srun_second_node() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "3"},
          {"SLURM_JOB_NODELIST", "gpu[01-03]"},
          {"SLURM_STEP_NODELIST", "gpu[02-03]"},
          {"SLURM_NNODES", "2"},
          {"SLURM_NTASKS", "2"},
          {"SLURM_NTASKS_PER_NODE", "1"},
          {"SLURM_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_NODEID", "1"},
          {"SLURM_GPUS_ON_NODE", "4"},
          {"SLURMD_NODENAME", "gpu03"},
          {"OMP_NUM_THREADS", "8"}};
}

bool mentions(const std::vector<std::string>& warnings, const std::string& text) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("srun ddprun train needs no flags") {
  auto machine = ddprun::launcher::testing::test_machine();
  machine.nvidia_gpu_count = 4;
  const auto r = resolve({"train"}, srun_second_node(), machine);
  const auto& c = r.config;
  CHECK(c.rdzv_backend == "c10d");
  CHECK(c.rdzv_id == "4242.3");
  CHECK(c.rdzv_endpoint == "gpu02:29400");
  CHECK(c.rdzv_host == "gpu02");
  CHECK(c.rdzv_port == 29400);
  CHECK(c.min_nodes == 2);
  CHECK(c.max_nodes == 2);
  CHECK(c.node_rank_hint == 1);
  CHECK(c.nproc_per_node == 4);
  CHECK(c.local_addr == "gpu03");
  CHECK(c.value_sources.at("rdzv_backend") == "slurm:SLURM_JOB_ID");
  CHECK(c.value_sources.at("rdzv_id") == "slurm:SLURM_JOB_ID,SLURM_STEP_ID");
  CHECK(c.value_sources.at("rdzv_endpoint") == "slurm:SLURM_STEP_NODELIST");
  CHECK(c.value_sources.at("nnodes") == "slurm:SLURM_STEP_NODELIST");
  CHECK(c.value_sources.at("node_rank") == "slurm:SLURM_NODEID");
  CHECK(c.value_sources.at("nproc_per_node") == "slurm:SLURM_GPUS_ON_NODE");
  CHECK(c.value_sources.at("local_addr") == "slurm:SLURMD_NODENAME");
  CHECK(c.value_sources.at("max_restarts") == "default");
  CHECK(r.warnings.empty());
}

TEST_CASE("without a step list the job's node list is used; without GPUs one worker") {
  Environment env = srun_second_node();
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_GPUS_ON_NODE");
  env.erase("SLURM_STEP_ID");
  const auto c = resolve({"train"}, env).config;
  CHECK(c.rdzv_endpoint == "gpu01:29400");
  CHECK(c.rdzv_id == "4242");
  CHECK(c.max_nodes == 3);
  CHECK(c.nproc_per_node == 1);
  CHECK(c.value_sources.at("rdzv_endpoint") == "slurm:SLURM_JOB_NODELIST");
  CHECK(c.value_sources.at("nproc_per_node") == "default");
}

TEST_CASE("Slurm needs SLURM_JOB_ID and a node list") {
  Environment env = srun_second_node();
  env.erase("SLURM_JOB_ID");
  CHECK_FALSE(read_slurm_step(env).has_value());
  CHECK(resolve({"s.py"}, env).config.rdzv_backend == "static");
  env = {{"SLURM_JOB_ID", "1"}};
  CHECK_FALSE(read_slurm_step(env).has_value());
}

TEST_CASE("explicit flags and PET_* win over Slurm") {
  Environment env = srun_second_node();
  env["PET_RDZV_ENDPOINT"] = "gpu03:5000";
  const auto c = resolve({"--nnodes", "1:2", "--nproc_per_node", "2", "--rdzv_id", "mine",
                          "--local-addr", "10.0.0.9", "train"},
                         env)
                     .config;
  CHECK(c.min_nodes == 1);
  CHECK(c.nproc_per_node == 2);
  CHECK(c.rdzv_id == "mine");
  CHECK(c.rdzv_endpoint == "gpu03:5000");
  CHECK(c.local_addr == "10.0.0.9");
  CHECK(c.rdzv_backend == "c10d");  // still Slurm's
  CHECK(c.value_sources.at("rdzv_endpoint") == "env:PET_RDZV_ENDPOINT");
  CHECK(c.value_sources.at("nnodes") == "cli");

  const auto standalone = resolve({"--standalone", "train"}, srun_second_node()).config;
  CHECK(standalone.rdzv_endpoint == "localhost:0");
  CHECK(standalone.value_sources.at("rdzv_backend") == "standalone");

  // An explicit static backend keeps its own endpoint rule, on Slurm's first node.
  const auto fixed = resolve({"--rdzv_backend", "static", "train"}, srun_second_node()).config;
  CHECK(fixed.rdzv_host == "gpu02");
  CHECK(fixed.rdzv_port == 29500);
  CHECK(fixed.node_rank == 1);
}

TEST_CASE("a malformed node list is a clear error naming the variable") {
  Environment env = srun_second_node();
  env["SLURM_STEP_NODELIST"] = "gpu[02-03";
  CHECK_THROWS_WITH(resolve({"train"}, env),
                    Catch::StartsWith("SLURM_STEP_NODELIST: 'gpu[02-03': missing ']'") &&
                        Catch::Contains("expected a Slurm hostlist"));
  env["SLURM_GPUS_ON_NODE"] = "lots";
  env["SLURM_STEP_NODELIST"] = "gpu[02-03]";
  CHECK_THROWS_WITH(resolve({"train"}, env),
                    Catch::StartsWith("--nproc-per-node (from SLURM_GPUS_ON_NODE)"));
}

TEST_CASE("warning: more than one ddprun task on the node") {
  for (const auto& [variable, value] : std::vector<std::pair<std::string, std::string>>{
           {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_TASKS_PER_NODE", "1,2(x3)"}}) {
    Environment env = srun_second_node();
    env.erase("SLURM_NTASKS_PER_NODE");
    env[variable] = value;
    const auto warnings = resolve({"train"}, env).warnings;
    INFO(variable);
    CHECK(mentions(warnings, variable + "=" + value));
    CHECK(mentions(warnings, "--ntasks-per-node=1"));
  }
  Environment env = srun_second_node();
  env.erase("SLURM_NTASKS_PER_NODE");
  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_NTASKS"] = "8";
  CHECK(mentions(resolve({"train"}, env).warnings, "SLURM_NTASKS=8 > SLURM_NNODES=2"));
}

TEST_CASE("warning: endpoint host outside the step's nodes") {
  const auto outside = resolve({"--rdzv_endpoint", "login1:29400", "train"}, srun_second_node());
  CHECK(mentions(outside.warnings, "'login1' is not a node of this Slurm step"));
  CHECK(mentions(outside.warnings, "gpu02:29400"));
  // Fully qualified names of step nodes and plain IP addresses are not flagged.
  CHECK(resolve({"--rdzv_endpoint", "gpu03.cluster:1", "train"}, srun_second_node())
            .warnings.empty());
  CHECK(resolve({"--rdzv_endpoint", "10.1.1.1:1", "train"}, srun_second_node()).warnings.empty());
  // localhost across two nodes is the classic hang.
  CHECK(mentions(resolve({"--rdzv_endpoint", "localhost:1", "train"}, srun_second_node()).warnings,
                 "'localhost'"));
}

TEST_CASE("warning: the step spans fewer nodes than --nnodes needs") {
  const auto r = resolve({"--nnodes", "3:4", "train"}, srun_second_node());
  CHECK(mentions(r.warnings, "needs at least 3 nodes but this Slurm step spans 2"));
  CHECK(mentions(r.warnings, "srun -N 3"));
  CHECK(resolve({"--nnodes", "1:4", "train"}, srun_second_node()).warnings.empty());
}

TEST_CASE("SLURM_TASKS_PER_NODE format") {
  CHECK(max_tasks_per_node("1") == 1);
  CHECK(max_tasks_per_node("2(x3),1") == 2);
  CHECK(max_tasks_per_node("1(x4)") == 1);
  CHECK_FALSE(max_tasks_per_node("2(x").has_value());
  CHECK_FALSE(max_tasks_per_node("x").has_value());
}
