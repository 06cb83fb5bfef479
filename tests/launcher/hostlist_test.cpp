// Hostlist expressions: the examples of Slurm's hostlist.c / scontrol(1), and malformed lists.

#include "launcher/hostlist.hpp"

#include <catch2/catch.hpp>

using ddprun::launcher::expand_hostlist;
using ddprun::launcher::HostlistError;
using Hosts = std::vector<std::string>;

TEST_CASE("plain names and separators") {
  CHECK(expand_hostlist("node1") == Hosts{"node1"});
  CHECK(expand_hostlist("a,b c\td\ne") == Hosts{"a", "b", "c", "d", "e"});
  CHECK(expand_hostlist("a,,b, c") == Hosts{"a", "b", "c"});
  CHECK(expand_hostlist("") == Hosts{});
  CHECK(expand_hostlist("tux2,tux1,tux2") == Hosts{"tux2", "tux1", "tux2"});  // not de-duplicated
}

TEST_CASE("ranges and lists in brackets") {
  const Hosts tux = expand_hostlist("tux[0-5,12,20-25]");
  CHECK(tux.size() == 13);
  CHECK(tux.front() == "tux0");
  CHECK(tux[6] == "tux12");
  CHECK(tux.back() == "tux25");
  CHECK(expand_hostlist("node[01-04,07]") ==
        Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_hostlist("n[8-10]") == Hosts{"n8", "n9", "n10"});
  CHECK(expand_hostlist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_hostlist("n[3]") == Hosts{"n3"});
  const Hosts linux_nodes = expand_hostlist("linux[0000-1023]");
  CHECK(linux_nodes.size() == 1024);
  CHECK(linux_nodes.front() == "linux0000");
  CHECK(linux_nodes.back() == "linux1023");
}

TEST_CASE("suffixes, several groups, and several tokens") {
  CHECK(expand_hostlist("tux[1-3]-ib") == Hosts{"tux1-ib", "tux2-ib", "tux3-ib"});
  CHECK(expand_hostlist("rack[1-2]-node[01-02]") ==
        Hosts{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"});
  CHECK(expand_hostlist("gpu[1-2],login1,cpu[07-08]-eth") ==
        Hosts{"gpu1", "gpu2", "login1", "cpu07-eth", "cpu08-eth"});
  CHECK(expand_hostlist("[1-2]x") == Hosts{"1x", "2x"});
}

TEST_CASE("malformed lists are errors that say what and where") {
  const auto error_of = [](const std::string& expression) {
    try {
      expand_hostlist(expression);
    } catch (const HostlistError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("node[1-3") == "missing ']' at offset 4");
  CHECK(error_of("node1-3]") == "']' without '[' at offset 7");
  CHECK(error_of("n[]") == "empty brackets at offset 1");
  CHECK(error_of("n[3-1]") == "range starts above its end at offset 2");
  CHECK(error_of("n[1,,2]") == "expected a number in brackets at offset 4");
  CHECK(error_of("n[a]") == "expected a number in brackets at offset 2");
  CHECK(error_of("n[1-2-3]") == "unexpected '-' in brackets at offset 5");
  CHECK(error_of("n[[1]]") == "'[' inside brackets at offset 2");
  CHECK(error_of("n[1:3]") == "unexpected ':' in brackets at offset 3");
  CHECK(error_of("n[-1]") == "expected a number in brackets at offset 2");
  CHECK(error_of("n[99999999999]") == "number too large in brackets at offset 2");
  CHECK(error_of("n[0-70000]") == "range holds more than 65536 hosts at offset 2");
  CHECK(error_of("a[0-300]b[0-300]") == "expression expands to more than 65536 hosts at offset 9");
  CHECK(error_of("ok,bad[1") == "missing ']' at offset 6");
}
