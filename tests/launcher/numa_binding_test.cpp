// --numa-binding: torchrun 2.13's four modes (torch/numa/binding.py) on a described two-socket
// machine, CUDA_VISIBLE_DEVICES, the errors where binding cannot apply, and reading the
// topology from a sysfs tree laid out as the kernel and the NVIDIA driver lay it out.

#include "launcher/numa_binding.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "launcher/usage_error.hpp"
#include "launcher_test_support.hpp"

using namespace ddprun::launcher;
using ddprun::launcher::testing::resolve;
using ddprun::launcher::testing::two_socket_topology;
using Plan = std::vector<std::vector<int>>;

namespace {

std::vector<std::string> texts(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& cpus : plan)
    out.push_back(cpu_list_text(cpus));
  return out;
}

using Texts = std::vector<std::string>;

}  // namespace

TEST_CASE("CPU lists in sysfs's form") {
  CHECK(parse_cpu_list("0-2,4,6-7\n") == std::set<int>{0, 1, 2, 4, 6, 7});
  CHECK(parse_cpu_list("") == std::set<int>{});
  CHECK_FALSE(parse_cpu_list("3-1"));
  CHECK_FALSE(parse_cpu_list("a"));
  CHECK(cpu_list_text({7, 0, 1, 2, 4, 6}) == "0-2,4,6-7");
  CHECK(cpu_list_text({5}) == "5");
}

TEST_CASE("the four binding modes give torchrun's CPU sets") {
  const NumaTopology t = two_socket_topology();
  SECTION("node: every CPU of the GPU's node") {
    CHECK(texts(plan_numa_binding(t, "node", 4, std::nullopt)) ==
          Texts{"0-3,8-11", "0-3,8-11", "4-7,12-15", "4-7,12-15"});
  }
  SECTION("socket: every node of the GPU's socket") {
    CHECK(texts(plan_numa_binding(t, "socket", 4, std::nullopt)) ==
          Texts{"0-3,8-11", "0-3,8-11", "4-7,12-15", "4-7,12-15"});
    NumaTopology one_socket = t;
    for (auto& [cpu, package] : one_socket.package)
      package = 0;
    CHECK(texts(plan_numa_binding(one_socket, "socket", 1, std::nullopt)) == Texts{"0-15"});
  }
  SECTION("exclusive: the node's physical cores split between its GPUs") {
    CHECK(texts(plan_numa_binding(t, "exclusive", 4, std::nullopt)) ==
          Texts{"0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"});
    // Three cores for two GPUs: the lower GPU index gets the extra core.
    NumaTopology three_cores = t;
    for (int cpu : {3, 11})
      three_cores.allowed_cpus.erase(cpu);
    CHECK(texts(plan_numa_binding(three_cores, "exclusive", 2, std::nullopt)) ==
          Texts{"0-1,8-9", "2,10"});
  }
  SECTION("core-complex: one last-level cache per GPU") {
    CHECK(texts(plan_numa_binding(t, "core-complex", 4, std::nullopt)) ==
          Texts{"0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"});
    // Caches with more usable CPUs come first.
    NumaTopology smaller = t;
    smaller.allowed_cpus.erase(0);
    CHECK(texts(plan_numa_binding(smaller, "core-complex", 1, std::nullopt)) == Texts{"2-3,10-11"});
  }
  SECTION("only CPUs ddprun may use") {
    NumaTopology restricted = t;
    restricted.allowed_cpus = {1, 2, 9};
    CHECK(texts(plan_numa_binding(restricted, "node", 1, std::nullopt)) == Texts{"1-2,9"});
  }
}

TEST_CASE("local rank N binds near visible GPU N (CUDA_VISIBLE_DEVICES, UUIDs)") {
  const NumaTopology t = two_socket_topology();
  CHECK(texts(plan_numa_binding(t, "node", 2, std::string("2,0"))) ==
        Texts{"4-7,12-15", "0-3,8-11"});
  // Alone on its node among the visible GPUs, GPU 2 gets all of node 1's cores.
  CHECK(texts(plan_numa_binding(t, "exclusive", 2, std::string("2,0"))) ==
        Texts{"4-7,12-15", "0-3,8-11"});
  CHECK(texts(plan_numa_binding(t, "node", 1, std::string("GPU-cccc"))) == Texts{"4-7,12-15"});
}

TEST_CASE("where binding cannot apply, the error says why") {
  const NumaTopology t = two_socket_topology();
  const auto error = [](const NumaTopology& topology, const std::string& mode, int nproc,
                        std::optional<std::string> visible) {
    try {
      plan_numa_binding(topology, mode, nproc, visible);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error(NumaTopology{}, "node", 1, std::nullopt),
             Catch::StartsWith("--numa-binding: binds each worker near its GPU, but no NVIDIA "
                               "GPU is visible (0 found)"));
  CHECK_THAT(error(t, "node", 1, std::string("")), Catch::Contains("CUDA_VISIBLE_DEVICES=''"));
  CHECK_THAT(error(t, "node", 5, std::nullopt),
             Catch::Contains("local rank 4 has no GPU: 5 workers, 4 visible GPUs"));
  CHECK_THAT(error(t, "node", 1, std::string("MIG-1234")), Catch::Contains("MIG device"));
  NumaTopology one_core = t;
  one_core.allowed_cpus = {0, 8, 4, 12};
  CHECK_THAT(error(one_core, "exclusive", 2, std::nullopt),
             Catch::Contains("exclusive: NUMA node 0 has 1 physical cores for 2 GPUs"));
  NumaTopology elsewhere = t;
  elsewhere.allowed_cpus = {4, 5};
  CHECK_THAT(error(elsewhere, "node", 1, std::nullopt),
             Catch::Contains("no CPU of NUMA node 0 (GPU 0000:1a:00.0, local rank 0)"));
}

TEST_CASE("the launcher refuses --numa-binding it cannot apply, and plans it when it can") {
  CHECK(
      resolve({"--numa-binding", "exclusive", "--nproc-per-node", "2", "s.py"}).config.numa_cpus ==
      Plan{{0, 1, 8, 9}, {2, 3, 10, 11}});
  auto no_gpus = ddprun::launcher::testing::test_machine();
  no_gpus.numa = NumaTopology{};
  CHECK_THROWS_WITH(resolve({"--numa-binding", "node", "s.py"}, {}, no_gpus),
                    Catch::Contains("no NVIDIA GPU is visible"));
}

TEST_CASE("the topology is read from sysfs and the NVIDIA driver's entries") {
  namespace fs = std::filesystem;
  char dir_template[] = "/tmp/ddprun_numa_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const fs::path root = dir_template;
  const auto put = [&](const std::string& path, const std::string& text) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text << "\n";
  };
  // An NVIDIA GPU on node 1, an NVSwitch (class 0x0680) and another vendor's device.
  put("sys/bus/pci/devices/0000:8a:00.0/vendor", "0x10de");
  put("sys/bus/pci/devices/0000:8a:00.0/class", "0x030200");
  put("sys/bus/pci/devices/0000:8a:00.0/numa_node", "1");
  put("sys/bus/pci/devices/0000:07:00.0/vendor", "0x10de");
  put("sys/bus/pci/devices/0000:07:00.0/class", "0x068000");
  put("sys/bus/pci/devices/0000:1a:00.0/vendor", "0x8086");
  put("sys/bus/pci/devices/0000:1a:00.0/class", "0x030000");
  put("sys/bus/pci/devices/0000:1b:00.0/vendor", "0x10de");  // single-node machine: -1
  put("sys/bus/pci/devices/0000:1b:00.0/class", "0x030000");
  put("sys/bus/pci/devices/0000:1b:00.0/numa_node", "-1");
  put("proc/driver/nvidia/gpus/0000:8a:00.0/information",
      "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-12345678-abcd\nBus Location: \t 0000:8a:00.0");
  put("sys/devices/system/node/possible", "0-1");
  put("sys/devices/system/node/node0/cpulist", "0");
  put("sys/devices/system/node/node1/cpulist", "1");
  for (const char* cpu : {"0", "1"}) {
    const std::string base = std::string("sys/devices/system/cpu/cpu") + cpu;
    put(base + "/topology/thread_siblings_list", cpu);
    put(base + "/topology/physical_package_id", cpu);
    put(base + "/cache/index0/type", "Instruction");
    put(base + "/cache/index0/level", "1");
    put(base + "/cache/index0/shared_cpu_list", "9");
    put(base + "/cache/index1/type", "Unified");
    put(base + "/cache/index1/level", "3");
    put(base + "/cache/index1/shared_cpu_list", "0-1");
  }
  const NumaTopology t = read_numa_topology(root.string(), {0, 1});
  fs::remove_all(root);
  REQUIRE(t.gpus.size() == 2);
  CHECK(t.gpus[0].pci_address == "0000:1b:00.0");
  CHECK(t.gpus[0].numa_node == 0);
  CHECK(t.gpus[0].uuid.empty());
  CHECK(t.gpus[1].pci_address == "0000:8a:00.0");
  CHECK(t.gpus[1].numa_node == 1);
  CHECK(t.gpus[1].uuid == "GPU-12345678-abcd");
  CHECK(t.nodes == std::set<int>{0, 1});
  CHECK(t.node_cpus.at(1) == std::set<int>{1});
  CHECK(t.package.at(1) == 1);
  CHECK(t.thread_siblings.at(0) == std::set<int>{0});
  CHECK(t.largest_cache_sharers.at(0) == std::set<int>{0, 1});
  CHECK(texts(plan_numa_binding(t, "node", 2, std::nullopt)) == Texts{"0", "1"});
}
