// The value forms, checked directly (the option-level tests go through resolve()).

#include "launcher/value_parsers.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <string>

#include "common/signals.hpp"
#include "launcher/gpu_visibility.hpp"
#include "launcher/usage_error.hpp"

namespace l = ddprun::launcher;

TEST_CASE("nnodes") {
  CHECK(l::parse_nnodes("3", "--nnodes").min == 3);
  CHECK(l::parse_nnodes("3", "--nnodes").max == 3);
  CHECK(l::parse_nnodes(" 1:4 ", "--nnodes").max == 4);
  for (const char* bad : {"3:2", "0", "1:2:3", "", ":", "a", "-1:2", "1:99999999999", "1.5"}) {
    INFO(bad);
    CHECK_THROWS_AS(l::parse_nnodes(bad, "--nnodes"), l::UsageError);
  }
}

TEST_CASE("endpoint") {
  auto e = l::parse_endpoint("node1:29400", "--rdzv_endpoint");
  CHECK(e.host == "node1");
  CHECK(e.port == 29400);
  e = l::parse_endpoint("node1.cluster.example", "x");
  CHECK(e.host == "node1.cluster.example");
  CHECK_FALSE(e.port.has_value());
  e = l::parse_endpoint("[::1]:0", "x");
  CHECK(e.host == "::1");
  CHECK(e.port == 0);
  CHECK(l::parse_endpoint("10.1.2.3:65535", "x").port == 65535);
  for (const char* bad : {"host:99999", "[::1", "host:", "host:-1", "host:12a", "::1", "ho st:1",
                          ":5", "[]:5", "host:123456"}) {
    INFO(bad);
    CHECK_THROWS_WITH(l::parse_endpoint(bad, "--rdzv_endpoint"),
                      Catch::StartsWith("--rdzv_endpoint: ") && Catch::Contains("expected HOST"));
  }
}

TEST_CASE("rdzv_conf") {
  const auto conf = l::parse_rdzv_conf(" join_timeout = 5 ,a=b=c", "--rdzv_conf");
  CHECK(conf.at("join_timeout") == "5");
  CHECK(conf.at("a") == "b=c");
  CHECK(l::parse_rdzv_conf("", "x").empty());
  CHECK(l::parse_rdzv_conf("k=1,k=2", "x").at("k") == "2");
  CHECK_THROWS_WITH(l::parse_rdzv_conf("join_timeout=", "--rdzv_conf"),
                    Catch::Contains("'join_timeout' has no value"));
  CHECK_THROWS_WITH(l::parse_rdzv_conf("=5", "--rdzv_conf"), Catch::Contains("empty key"));
  CHECK_THROWS_WITH(l::parse_rdzv_conf("a=1,,b=2", "--rdzv_conf"), Catch::Contains("empty key"));
  CHECK_THROWS_WITH(l::parse_rdzv_conf("novalue", "--rdzv_conf"), Catch::Contains("no value"));

  for (const char* yes : {"1", "true", "T", "yes", "Y"})
    CHECK(l::check_rdzv_conf_values({{"is_host", yes}}, "--rdzv_conf").is_host == true);
  for (const char* no : {"0", "False", "f", "NO", "n"})
    CHECK(l::check_rdzv_conf_values({{"is_host", no}}, "--rdzv_conf").is_host == false);
  CHECK_THROWS(l::check_rdzv_conf_values({{"is_host", "2"}}, "--rdzv_conf"));
  // One parse for the launcher and the rendezvous: they can no longer disagree.
  CHECK(l::check_rdzv_conf_values({{"last_call_timeout", "0"}}, "--rdzv_conf")
            .last_call_timeout.count() == 0);
  CHECK_THROWS(l::check_rdzv_conf_values({{"join_timeout", "1e8"}}, "--rdzv_conf"));

  CHECK_NOTHROW(l::check_rdzv_conf_values({{"join_timeout", "600"},
                                           {"read_timeout", "1.5"},
                                           {"is_host", "yes"},
                                           {"store_type", "file"},
                                           {"keep_alive_max_attempt", "3"},
                                           {"unknown", "?"}},
                                          "--rdzv_conf"));
  CHECK_THROWS(l::check_rdzv_conf_values({{"last_call_timeout", "-1"}}, "x"));
  CHECK_THROWS(l::check_rdzv_conf_values({{"keep_alive_max_attempt", "0"}}, "x"));
  CHECK_THROWS(l::check_rdzv_conf_values({{"store_type", "etcd"}}, "x"));
}

TEST_CASE("a value wrapped whole in one pair of matching quotes") {
  CHECK(l::without_enclosing_quotes("'a=1,b=2'") == "a=1,b=2");
  CHECK(l::without_enclosing_quotes("\"0:1,1:2\"") == "0:1,1:2");
  CHECK(l::without_enclosing_quotes(" 'a' ") == "a");
  CHECK(l::without_enclosing_quotes("''").empty());
  CHECK(l::without_enclosing_quotes("' a '") == " a ");
  CHECK(l::without_enclosing_quotes("\"'a'\"") == "'a'");
  for (const char* as_written :
       {"a=1", "'a=1", "a=1'", "'a=1\"", "'", "\"", "", "a='1'", "'a',b"}) {
    INFO(as_written);
    CHECK(l::without_enclosing_quotes(as_written) == as_written);
  }
}

TEST_CASE("logs specs") {
  CHECK(l::parse_logs_specs("default", "--logs-specs") == "default");
  CHECK_THROWS_WITH(l::parse_logs_specs("mine", "--logs-specs"),
                    Catch::StartsWith("--logs-specs: 'mine' ") && Catch::Contains("cannot load"));
}

TEST_CASE("std streams (redirects and tee)") {
  CHECK(l::parse_std_streams("3", "-r").all == 3);
  CHECK(l::parse_std_streams("3", "-r").for_local_rank(5) == 3);
  const auto map = l::parse_std_streams("0:1,1:2", "-r");
  CHECK(map.for_local_rank(0) == 1);
  CHECK(map.for_local_rank(1) == 2);
  CHECK(map.for_local_rank(2) == 0);
  for (const char* bad : {"4", "0:4", "10:1", "0:1,", "a", "0=1", "-1", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(l::parse_std_streams(bad, "--redirects"), Catch::StartsWith("--redirects"));
  }
}

TEST_CASE("filters, local ranks, signals, integers, seconds, env flags") {
  CHECK(l::parse_filter_list("") == std::vector<std::string>{});
  CHECK(l::parse_filter_list("a,,b,c") == std::vector<std::string>{"a,b", "c"});
  CHECK(l::parse_local_ranks("", "x").empty());
  CHECK(l::parse_local_ranks("3, 1,1", "x") == std::vector<int>{1, 3});
  CHECK(l::parse_signal_names("SIGTERM, SIGUSR1", "x") == std::vector<int>{SIGTERM, SIGUSR1});
  CHECK_THROWS(l::parse_signal_names("TERM", "x"));
  CHECK_THROWS(l::parse_signal_names("SIGSTOP", "x"));
  CHECK(l::parse_int(" +7 ", "x", "e", 0, 10) == 7);
  CHECK_THROWS(l::parse_int("11", "x", "e", 0, 10));
  CHECK_THROWS(l::parse_int("1e3", "x", "e", 0, 10000));
  CHECK(l::seconds_option("1e2", "x", true) == ddprun::common::Seconds(100));
  CHECK(l::seconds_option("0", "x", false) == ddprun::common::Seconds(0));
  CHECK(l::seconds_option(" .5 ", "x", true) == ddprun::common::Seconds(0.5));
  CHECK(l::seconds_option("5.", "x", true) == ddprun::common::Seconds(5));
  CHECK(l::seconds_option("2.5E+1", "x", true) == ddprun::common::Seconds(25));
  CHECK(l::seconds_option("1e7", "x", true) == ddprun::common::Seconds(1e7));
  for (const char* bad : {"0", "-1", "nan", "inf", "", "5s", "+5", "0x10", ".", "1e", "1e+", "e5",
                          "-", "1..2", "1e400", "1e-400", "1.5e7", "5 5"}) {
    INFO(bad);
    CHECK_THROWS(l::seconds_option(bad, "x", true));
  }
  CHECK_THROWS_WITH(l::seconds_option("0x10", "x", true), Catch::Contains("not a number"));
  CHECK_THROWS_WITH(l::seconds_option("1e400", "x", true), Catch::Contains("out of range"));
  CHECK(l::parse_env_flag("1", "PET_X"));
  CHECK_FALSE(l::parse_env_flag("0", "PET_X"));
  CHECK(l::parse_env_flag("2", "PET_X"));
  CHECK_THROWS_WITH(l::parse_env_flag("yes", "PET_X"), Catch::StartsWith("PET_X"));
}

TEST_CASE("visible GPUs honour CUDA_VISIBLE_DEVICES") {
  CHECK(l::visible_gpu_count(4, std::nullopt) == 4);
  CHECK(l::visible_gpu_count(4, "0,2") == 2);
  CHECK(l::visible_gpu_count(4, "") == 0);
  CHECK(l::visible_gpu_count(4, "-1") == 0);
  CHECK(l::visible_gpu_count(4, "1,7,2") == 1);  // CUDA stops at the first invalid index
  CHECK(l::visible_gpu_count(4, "1,1") == 1);
  CHECK(l::visible_gpu_count(2, "GPU-5e3a,GPU-77aa,GPU-1234") == 2);
  CHECK(l::visible_gpu_count(0, "0") == 0);
}

TEST_CASE("signal names: the project's table gives what glibc's sigabbrev_np gives") {
  // common/signals.cpp writes the names out (the portable build's glibc 2.28 has no
  // sigabbrev_np); wherever this test builds, glibc is new enough to check every number.
  for (int number = -1; number <= NSIG + 1; ++number) {
    INFO(number);
    const char* glibc = ::sigabbrev_np(number);
    const std::string expected =
        glibc != nullptr ? std::string("SIG") + glibc : "SIG" + std::to_string(number);
    CHECK(ddprun::common::signal_name(number) == expected);
    if (glibc != nullptr)
      CHECK(ddprun::common::signal_number(expected) == number);
  }
  CHECK_FALSE(ddprun::common::signal_number("SIGRTMIN").has_value());
  CHECK_FALSE(ddprun::common::signal_number("TERM").has_value());
  CHECK_FALSE(ddprun::common::signal_number("SIG").has_value());
}
