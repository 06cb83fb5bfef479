// The ddprun-store command line.

#include "rendezvous/store/daemon_options.hpp"

#include <catch2/catch.hpp>

#include "rendezvous/store/descriptor_limit.hpp"

using namespace ddprun::rendezvous::store;

TEST_CASE("daemon options: defaults, both spellings, and errors naming the argument", "[unit]") {
  const auto defaults = std::get<DaemonOptions>(parse_daemon_options({}));
  CHECK(defaults.server.host == "0.0.0.0");
  CHECK(defaults.server.port == 0);
  CHECK(defaults.server.limits.max_value_bytes == 8 * 1024 * 1024);

  const auto parsed = std::get<DaemonOptions>(parse_daemon_options(
      {"--host", "127.0.0.1", "--port=29500", "--max-connections", "10",
       "--max-memory-bytes=1048576", "--log-level", "debug", "--legacy-generation=g1"}));
  CHECK(parsed.server.host == "127.0.0.1");
  CHECK(parsed.server.port == 29500);
  CHECK(parsed.server.limits.max_connections == 10);
  CHECK(parsed.server.limits.max_total_bytes == 1048576);
  CHECK(parsed.server.log_level == StoreLogLevel::debug);
  CHECK(parsed.server.legacy_generation == WireGeneration::g1);
  CHECK_FALSE(parsed.secret_file);
  // The file is read by main (with the environment's sources), never by the parser.
  const auto with_secret =
      std::get<DaemonOptions>(parse_daemon_options({"--secret-file=/run/job.key"}));
  CHECK(with_secret.secret_file == std::optional<std::string>("/run/job.key"));
  CHECK(with_secret.server.secret.empty());
  CHECK(std::get<std::string>(parse_daemon_options({"--secret-file="})) ==
        "invalid value '' for --secret-file");

  CHECK(std::get<std::string>(parse_daemon_options({"--port", "65536"})) ==
        "invalid value '65536' for --port");
  CHECK(std::get<std::string>(parse_daemon_options({"--nope"})) == "unknown option '--nope'");
  CHECK(std::get<std::string>(parse_daemon_options({"--port"})) == "option '--port' needs a value");
  CHECK(std::get<std::string>(parse_daemon_options({"--max-key-bytes", "-1"})) ==
        "invalid value '-1' for --max-key-bytes");
  CHECK(std::get<std::string>(parse_daemon_options({"--max-connections=0"})).find("positive") !=
        std::string::npos);
  CHECK(std::get<DaemonOptions>(parse_daemon_options({"-h"})).show_help);
}

TEST_CASE("descriptor limit: soft up to hard, hard up to the wanted count within fs.nr_open",
          "[unit]") {
  // Privileged: both raised to what is wanted.
  auto asked = descriptor_limit_to_ask({1024, 20000}, 65600, 1 << 20);
  CHECK(asked.soft == 65600);
  CHECK(asked.hard == 65600);
  // fs.nr_open caps it.
  asked = descriptor_limit_to_ask({1024, 20000}, 65600, 50000);
  CHECK(asked.soft == 50000);
  CHECK(asked.hard == 50000);
  // The fallback without CAP_SYS_RESOURCE (nr_open taken as the hard limit): soft to hard.
  asked = descriptor_limit_to_ask({1024, 20000}, 65600, 20000);
  CHECK(asked.soft == 20000);
  CHECK(asked.hard == 20000);
  // Never lowered.
  asked = descriptor_limit_to_ask({40000, 80000}, 100, 1 << 20);
  CHECK(asked.soft == 40000);
  CHECK(asked.hard == 80000);
  CHECK(descriptor_shortage({40000, 80000}, 33000) == std::nullopt);
  const auto shortage = descriptor_shortage({20000, 20000}, 33024);
  REQUIRE(shortage);
  CHECK(shortage->find("RLIMIT_NOFILE is 20000") != std::string::npos);
}
