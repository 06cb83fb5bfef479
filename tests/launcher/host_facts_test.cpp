// probe_host() on the machine the test runs on: real /proc, PATH and /dev/urandom.

#include "launcher/host_facts.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

using ddprun::launcher::probe_host;

TEST_CASE("probe_host describes this machine") {
  namespace fs = std::filesystem;
  const auto facts = probe_host({{"PATH", "/nonexistent:/usr/bin:/bin"}});
  CHECK(facts.cpu_count == static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  CHECK(facts.executable_dir == fs::read_symlink("/proc/self/exe").parent_path().string());
  CHECK(facts.python3_on_path == "/usr/bin/python3");

  int driver_gpus = 0;
  std::error_code error;
  for (fs::directory_iterator it("/proc/driver/nvidia/gpus", error), end; !error && it != end;
       it.increment(error)) {
    ++driver_gpus;
  }
  if (driver_gpus > 0)
    CHECK(facts.nvidia_gpu_count == driver_gpus);
  if (!fs::exists("/dev/nvidia0") && driver_gpus == 0)
    CHECK(facts.nvidia_gpu_count == 0);

  const std::regex uuid4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  CHECK(std::regex_match(facts.fresh_run_id, uuid4));
  CHECK(probe_host({}).fresh_run_id != facts.fresh_run_id);
  CHECK_FALSE(probe_host({}).python3_on_path.has_value());
}
