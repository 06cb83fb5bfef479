// The node checks' pure parts: which checks apply to a node, what nvidia-smi's answer means,
// the quoted output, and the round machine's check before each join with its retry interval.
#include <catch2/catch.hpp>

#include "agent/node_check/node_check_plan.hpp"
#include "rendezvous/round/round_machine.hpp"

using namespace ddprun::agent;
namespace rdzv = ddprun::rendezvous::round;

namespace {

GpuCheck plan_gpus(const GpuFacts& facts) {
  const NodeCheckPlan plan = plan_node_checks({"true", {}}, {}, {}, facts);
  REQUIRE(plan.gpus);
  return *plan.gpus;
}

bool plans_gpu_check(const GpuFacts& facts) {
  return plan_node_checks({"true", {}}, {}, {}, facts).gpus.has_value();
}

template <class Effect>
std::vector<Effect> effects_of(std::vector<rdzv::MachineEffect> effects) {
  std::vector<Effect> found;
  for (auto& effect : effects) {
    if (auto* wanted = std::get_if<Effect>(&effect))
      found.push_back(*wanted);
  }
  return found;
}

}  // namespace

TEST_CASE("node checks: the folders are --log-dir and the bundled trainer's snapshot folder") {
  LogConfig logs;
  WorkerSpec script;
  script.entry_kind = EntryKind::kPythonScript;
  script.argv = {"python", "-u", "train.py", "trainer_config.snapshot_path=/x/s.pt"};
  CHECK(plan_node_checks({"true", {}}, script, logs, {}).folders.empty());

  logs.log_dir = "/var/log/run";
  CHECK(plan_node_checks({"true", {}}, script, logs, {}).folders ==
        std::vector<std::string>{"/var/log/run"});
  logs.log_dir = "/dev/null";  // file logging off: nothing to write there
  CHECK(plan_node_checks({"true", {}}, script, logs, {}).folders.empty());

  WorkerSpec trainer;
  trainer.entry_kind = EntryKind::kBundledTrainer;
  trainer.argv = {"/opt/ddprun-train", "cfg.yaml"};
  CHECK(trainer_snapshot_folder(trainer) == ".");  // snapshot.pt in the working folder
  trainer.argv.push_back("trainer_config.snapshot_path=/data/a/s.pt");
  trainer.argv.push_back("trainer_config.snapshot_path=/data/b/s.pt");  // the last one wins
  CHECK(trainer_snapshot_folder(trainer) == "/data/b");
  logs.log_dir = "/data/b";
  CHECK(plan_node_checks({"true", {}}, trainer, logs, {}).folders ==
        std::vector<std::string>{"/data/b"});
  CHECK_FALSE(trainer_snapshot_folder(script));
}

TEST_CASE("node checks: the GPU query runs only where GPUs are and nvidia-smi is found") {
  GpuFacts cpu_node;
  cpu_node.nvidia_smi = "/usr/bin/nvidia-smi";
  CHECK_FALSE(plans_gpu_check(cpu_node));

  GpuFacts gpu_node;
  gpu_node.nvidiactl = true;
  gpu_node.device_nodes = 4;
  CHECK_FALSE(plans_gpu_check(gpu_node));  // no nvidia-smi: nothing is required
  gpu_node.nvidia_smi = "/usr/bin/nvidia-smi";
  const GpuCheck all = plan_gpus(gpu_node);
  CHECK(all.argv == std::vector<std::string>{"/usr/bin/nvidia-smi", "--query-gpu=index,name",
                                             "--format=csv,noheader"});
  CHECK(all.min_count == 4);
  CHECK(all.indexes.empty());

  gpu_node.cuda_visible_devices = "1,3";
  const GpuCheck some = plan_gpus(gpu_node);
  CHECK(some.indexes == std::vector<int>{1, 3});
  CHECK(some.min_count == 0);
  gpu_node.cuda_visible_devices = "";  // the workers see no GPU
  CHECK_FALSE(plans_gpu_check(gpu_node));
  gpu_node.cuda_visible_devices = "GPU-8a1b2c3d";  // by UUID: at least one must answer
  CHECK(plan_gpus(gpu_node).min_count == 1);

  GpuFacts container;  // the container toolkit names the GPUs, no device nodes seen yet
  container.nvidia_visible_devices = "all";
  container.nvidia_smi = "/usr/bin/nvidia-smi";
  CHECK(plans_gpu_check(container));
  container.nvidia_visible_devices = "void";
  CHECK_FALSE(plans_gpu_check(container));
}

TEST_CASE("node checks: nvidia-smi's answer names a GPU that does not answer") {
  GpuCheck two{{}, {}, 2};
  CHECK_FALSE(gpu_query_problem("0, NVIDIA H100 80GB HBM3\n1, NVIDIA H100 80GB HBM3\n", two));
  CHECK(gpu_query_problem("0, NVIDIA H100 80GB HBM3\n", two) ==
        "2 GPU(s) expected, 1 answered nvidia-smi");
  CHECK(gpu_query_problem("0, NVIDIA H100\nUnable to determine the device handle for GPU "
                          "0000:3B:00.0: Unknown Error\n",
                          two) ==
        "nvidia-smi: Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error");
  GpuCheck by_index{{}, {1, 3}, 0};
  CHECK_FALSE(gpu_query_problem("0, A\n1, A\n2, A\n3, A\n", by_index));
  CHECK(gpu_query_problem("0, A\n1, A\n2, A\n", by_index) ==
        "GPU 3 (CUDA_VISIBLE_DEVICES) does not answer: 3 GPU(s) listed by nvidia-smi");
  CHECK(gpu_query_problem("No devices were found\n", GpuCheck{{}, {}, 1}) ==
        "nvidia-smi: No devices were found");
}

TEST_CASE("node checks: a failure quotes the last lines of the command's output") {
  CHECK(last_output_lines("", 3).empty());
  CHECK(last_output_lines("one\n\n  two  \nthree\nfour\n\n", 3) == "two | three | four");
  CHECK(last_output_lines("disk bad", 3) == "disk bad");
  CHECK(last_output_lines(std::string(500, 'x'), 1).size() == 200);
}

TEST_CASE("round machine: checks before each join, and retries after the interval") {
  rdzv::MachineConfig config;
  config.run_id = "job";
  config.self.addr = "node-c";
  config.self.nonce = "n";
  config.self.min_nodes = 2;
  config.self.max_nodes = 3;
  config.node_check_interval = ddprun::common::Seconds(30);
  rdzv::RoundMachine machine(config);
  const rdzv::MachineTime start = rdzv::machine_time(1000);

  machine.step(rdzv::Begin{}, start);
  auto effects = machine.take_effects();
  REQUIRE(effects_of<rdzv::CheckNode>(effects).size() == 1);
  CHECK(effects_of<rdzv::IssueKv>(effects).empty());  // nothing joins before the check
  CHECK(std::string(machine.phase_name()) == "node-check");
  CHECK_FALSE(machine.next_deadline());  // the check runs: no retry is due

  machine.step(rdzv::NodeChecked{false, "health check command: exit status 3: disk bad"},
               start + ddprun::common::Seconds(2));
  effects = machine.take_effects();
  const auto notices = effects_of<rdzv::Notice>(effects);
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].kind == "node_check_failed");
  CHECK(notices[0].round == 0);
  CHECK(notices[0].text ==
        "node check failed on node-c: health check command: exit status 3: disk bad; not "
        "joining round 0, retrying in 30 s");
  CHECK(effects_of<rdzv::IssueKv>(effects).empty());
  CHECK(effects_of<rdzv::CheckNode>(effects).empty());
  REQUIRE(machine.next_deadline() == start + ddprun::common::Seconds(32));

  // Before the interval nothing happens; at its end the checks run again.
  machine.step(rdzv::TimerFired{}, start + ddprun::common::Seconds(10));
  CHECK(machine.take_effects().empty());
  machine.step(rdzv::TimerFired{}, start + ddprun::common::Seconds(32));
  effects = machine.take_effects();
  CHECK(effects_of<rdzv::CheckNode>(effects).size() == 1);
  CHECK_FALSE(machine.next_deadline());

  // A pass joins; an answer nobody asked for is ignored.
  machine.step(rdzv::NodeChecked{true, ""}, start + ddprun::common::Seconds(33));
  effects = machine.take_effects();
  CHECK_FALSE(effects_of<rdzv::IssueKv>(effects).empty());
  CHECK(effects_of<rdzv::CheckNode>(effects).empty());
  CHECK(std::string(machine.phase_name()) == "checking-config");
  machine.step(rdzv::NodeChecked{true, ""}, start + ddprun::common::Seconds(34));
  CHECK(machine.take_effects().empty());
}

TEST_CASE("round machine: a signal while the node checks ends the agent at once") {
  rdzv::MachineConfig config;
  config.run_id = "job";
  config.node_check_interval = ddprun::common::Seconds(30);
  rdzv::RoundMachine machine(config);
  machine.step(rdzv::Begin{}, rdzv::machine_time(5));
  machine.step(rdzv::NodeChecked{false, "folder /x: not writable"}, rdzv::machine_time(6));
  (void)machine.take_effects();
  machine.step(rdzv::SignalReceived{15}, rdzv::machine_time(7));
  const auto finishes = effects_of<rdzv::Finish>(machine.take_effects());
  REQUIRE(finishes.size() == 1);
  CHECK(finishes[0].exit_status == 128 + 15);
  CHECK(machine.finished());
}

TEST_CASE("round machine: without node checks, Begin joins at once") {
  rdzv::MachineConfig config;
  config.run_id = "job";
  rdzv::RoundMachine machine(config);
  machine.step(rdzv::Begin{}, rdzv::machine_time(5));
  const auto effects = machine.take_effects();
  CHECK(effects_of<rdzv::CheckNode>(effects).empty());
  CHECK_FALSE(effects_of<rdzv::IssueKv>(effects).empty());
}
