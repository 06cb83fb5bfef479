// Entry-point rules: what every worker runs.

#include "launcher/entry_point.hpp"

#include <catch2/catch.hpp>

#include "launcher/usage_error.hpp"
#include "launcher_test_support.hpp"

using ddprun::launcher::EntryKind;
using ddprun::launcher::UsageError;
using ddprun::launcher::testing::resolve;
using Argv = std::vector<std::string>;

TEST_CASE("a script runs as <python> -u script args") {
  const auto c = resolve({"train.py", "--lr", "3"}).config;
  CHECK(c.entry_kind == EntryKind::kPythonScript);
  CHECK(c.worker_argv == Argv{"/usr/bin/python3", "-u", "train.py", "--lr", "3"});
}

TEST_CASE("PYTHON_EXEC wins over python3 on PATH; bare python3 is the last resort") {
  CHECK(resolve({"s.py"}, {{"PYTHON_EXEC", "/opt/py/bin/python"}}).config.worker_argv ==
        Argv{"/opt/py/bin/python", "-u", "s.py"});
  auto machine = ddprun::launcher::testing::test_machine();
  machine.python3_on_path.reset();
  CHECK(resolve({"s.py"}, {}, machine).config.worker_argv == Argv{"python3", "-u", "s.py"});
  CHECK(resolve({"s.py"}, {{"PYTHON_EXEC", ""}}).config.worker_argv ==
        Argv{"/usr/bin/python3", "-u", "s.py"});
}

TEST_CASE("-m runs a module") {
  const auto c = resolve({"-m", "pkg.train", "-x"}).config;
  CHECK(c.entry_kind == EntryKind::kPythonModule);
  CHECK(c.worker_argv == Argv{"/usr/bin/python3", "-u", "-m", "pkg.train", "-x"});
  CHECK(resolve({"--module", "pkg"}).config.entry_kind == EntryKind::kPythonModule);
}

TEST_CASE("--no-python runs the program directly") {
  for (const char* flag : {"--no-python", "--no_python"}) {
    const auto c = resolve({flag, "/bin/echo", "hi", "-m"}).config;
    CHECK(c.entry_kind == EntryKind::kBinary);
    CHECK(c.worker_argv == Argv{"/bin/echo", "hi", "-m"});
  }
  // With --no-python, "train" is just a program name.
  CHECK(resolve({"--no-python", "train"}).config.worker_argv == Argv{"train"});
}

TEST_CASE("the word train runs the bundled trainer next to ddprun") {
  const auto c = resolve({"--standalone", "train", "--max-iters", "5"}).config;
  CHECK(c.entry_kind == EntryKind::kBundledTrainer);
  CHECK(c.entry_point == "train");
  CHECK(c.worker_argv == Argv{"/opt/ddprun/bin/ddprun-train", "--max-iters", "5"});
}

TEST_CASE("--run-path runs the script path and wins over -m and --no-python") {
  const auto c = resolve({"--run-path", "-m", "--no-python", "/abs/s.py", "a"}).config;
  CHECK(c.run_path);
  CHECK(c.entry_kind == EntryKind::kPythonScript);
  CHECK(c.worker_argv == Argv{"/usr/bin/python3", "-u", "/abs/s.py", "a"});
}

TEST_CASE("-m together with --no-python is refused, as torchrun does") {
  CHECK_THROWS_WITH(resolve({"-m", "--no-python", "x"}),
                    Catch::StartsWith("-m/--module: cannot be combined with --no-python"));
  CHECK_THROWS_WITH(resolve({"--no_python", "x"}, {{"PET_MODULE", "1"}}),
                    Catch::Contains("--no-python"));
}

TEST_CASE("a missing entry point is an error") {
  CHECK_THROWS_AS(resolve({"--nnodes", "2"}), UsageError);
  CHECK_THROWS_WITH(resolve({}), Catch::StartsWith("training_script: missing"));
  // A value option swallows the next word, so nothing is left for the entry point.
  CHECK_THROWS_WITH(resolve({"--role", "train"}), Catch::StartsWith("training_script"));
}
