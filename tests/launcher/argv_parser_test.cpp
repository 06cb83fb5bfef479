// The command-line grammar on its own (launcher/argv_parser.hpp), with a small option table of
// its own: every way an option can be written, every problem, and every prefix of every name.
// The grammar was checked, before Boost.Program_options left, against Boost's parse of 292,000
// argument lists (every list of up to three words from a vocabulary of 65 tricky words); the
// differences kept on purpose are the cases marked "not as Boost" below.

#include "launcher/argv_parser.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/command_line.hpp"
#include "launcher/option_table.hpp"
#include "launcher/usage_error.hpp"

namespace {

using namespace ddprun::launcher;
using Words = std::vector<std::string>;

// Shaped like ddprun's table: long names with both spellings, names that are prefixes of other
// names (log_dir/logs_specs, health_check/health_check_timeout), short flags and short values.
const std::vector<ArgvOption> kOptions{
    {"nnodes", "", '\0', true},
    {"nproc_per_node", "nproc-per-node", '\0', true},
    {"rdzv_backend", "rdzv-backend", '\0', true},
    {"rdzv_id", "rdzv-id", '\0', true},
    {"standalone", "", '\0', false},
    {"log_dir", "log-dir", '\0', true},
    {"logs_specs", "logs-specs", '\0', true},
    {"health_check", "health-check", '\0', true},
    {"health_check_timeout", "health-check-timeout", '\0', true},
    {"redirects", "", 'r', true},
    {"tee", "", 't', true},
    {"module", "", 'm', false},
    {"no_python", "no-python", '\0', false},
    {"help", "", 'h', false},
};

ArgvParse parse(const Words& words) {
  return parse_argv(words, kOptions);
}

// "name=value@spelling" per option (a flag without "=value"), then "| entry" when there is one.
std::string summary(const Words& words) {
  const ArgvParse parsed = parse(words);
  std::string text;
  for (const ArgvOccurrence& option : parsed.options) {
    text.append(option.name);
    if (option.value)
      text.append("=").append(*option.value);
    text.append("@").append(option.spelling).append(" ");
  }
  if (parsed.entry)
    text.append("| ").append(words.at(*parsed.entry));
  return text;
}

struct Failure {
  ArgvProblem problem;
  std::string word;
  std::vector<std::string> candidates;
};

Failure failure(const Words& words) {
  try {
    parse(words);
  } catch (const ArgvError& error) {
    return {error.problem(), error.word(), error.candidates()};
  }
  FAIL("no error for this command line");
  return {};
}

}  // namespace

TEST_CASE("long options: --name VALUE, --name=VALUE, either spelling") {
  CHECK(summary({"--nnodes", "2"}) == "nnodes=2@--nnodes ");
  CHECK(summary({"--nnodes=2"}) == "nnodes=2@--nnodes ");
  CHECK(summary({"--nproc_per_node", "4"}) == "nproc_per_node=4@--nproc_per_node ");
  CHECK(summary({"--nproc-per-node=4"}) == "nproc_per_node=4@--nproc-per-node ");
  CHECK(summary({"--rdzv-id=a=b"}) == "rdzv_id=a=b@--rdzv-id ");  // the first '=' splits
  CHECK(summary({"--standalone"}) == "standalone@--standalone ");
  CHECK(summary({"--no-python"}) == "no_python@--no-python ");
}

TEST_CASE("a value is the next word whatever it looks like, except a short option alone") {
  CHECK(summary({"--nnodes", "--standalone"}) == "nnodes=--standalone@--nnodes ");
  CHECK(summary({"--nnodes", "-x"}) == "nnodes=-x@--nnodes ");
  CHECK(summary({"--nnodes", "-1"}) == "nnodes=-1@--nnodes ");
  CHECK(summary({"--nnodes", "-r3"}) == "nnodes=-r3@--nnodes ");
  CHECK(summary({"--nnodes", "-hm"}) == "nnodes=-hm@--nnodes ");
  CHECK(summary({"--nnodes", "--"}) == "nnodes=--@--nnodes ");
  CHECK(summary({"--nnodes", "-"}) == "nnodes=-@--nnodes ");
  CHECK(summary({"--nnodes", ""}) == "nnodes=@--nnodes ");
  CHECK(summary({"--nnodes", "--=x"}) == "nnodes=--=x@--nnodes ");
  for (const char* short_option : {"-r", "-t", "-m", "-h"}) {
    INFO(short_option);
    const Failure f = failure({"--nnodes", short_option, "s.py"});
    CHECK(f.problem == ArgvProblem::kMissingValue);
    CHECK(f.word == "--nnodes");
  }
  // A next word "--name=" is an empty value, named after the option that wanted it.
  for (const char* empty : {"--rdzv_id=", "--bogus=", "--="}) {
    INFO(empty);
    const Failure f = failure({"--nnodes", empty});
    CHECK(f.problem == ArgvProblem::kEmptyValue);
    CHECK(f.word == "--nnodes");
  }
}

TEST_CASE("abbreviations: a prefix of one option's names, an exact name always wins") {
  CHECK(summary({"--nn", "2"}) == "nnodes=2@--nn ");
  CHECK(summary({"--nproc", "2"}) == "nproc_per_node=2@--nproc ");
  CHECK(summary({"--nproc-p=2"}) == "nproc_per_node=2@--nproc-p ");
  CHECK(summary({"--stand"}) == "standalone@--stand ");
  CHECK(summary({"--health_check", "true"}) == "health_check=true@--health_check ");
  CHECK(summary({"--health-check", "true"}) == "health_check=true@--health-check ");
  CHECK(summary({"--health_check_t", "5"}) == "health_check_timeout=5@--health_check_t ");

  const Failure rdzv = failure({"--rdzv", "x"});
  CHECK(rdzv.problem == ArgvProblem::kAmbiguous);
  CHECK(rdzv.word == "--rdzv");
  CHECK(rdzv.candidates == std::vector<std::string>{"rdzv_backend", "rdzv_id"});
  const Failure log = failure({"--log=x"});
  CHECK(log.problem == ArgvProblem::kAmbiguous);
  CHECK(log.word == "--log=x");  // the word as written
  CHECK(log.candidates == std::vector<std::string>{"log_dir", "logs_specs"});
  const Failure health = failure({"--health"});
  CHECK(health.candidates == std::vector<std::string>{"health_check", "health_check_timeout"});
}

TEST_CASE("every prefix of every long name means its option, or lists all it could mean") {
  for (const ArgvOption& option : kOptions) {
    for (const std::string_view name : {option.name, option.alias}) {
      for (std::size_t length = 1; length <= name.size(); ++length) {
        const std::string typed(name.substr(0, length));
        INFO("--" << typed);
        std::vector<std::string> expected;  // the options whose names begin with `typed`
        std::string exact;                  // the option named `typed` exactly, if any
        for (const ArgvOption& other : kOptions) {
          if (other.name == typed || other.alias == typed)
            exact = other.name;
          if (other.name.starts_with(typed) ||
              (!other.alias.empty() && other.alias.starts_with(typed)))
            expected.emplace_back(other.name);
        }
        if (!exact.empty() || expected.size() == 1) {
          const std::string meant = exact.empty() ? expected[0] : exact;
          const bool takes_value = std::any_of(kOptions.begin(), kOptions.end(), [&](auto& o) {
            return o.name == meant && o.takes_value;
          });
          const ArgvParse parsed = parse({"--" + typed + (takes_value ? "=v" : "")});
          REQUIRE(parsed.options.size() == 1);
          CHECK(parsed.options[0].name == meant);
          CHECK(parsed.options[0].spelling == "--" + typed);
          CHECK(parsed.options[0].value ==
                (takes_value ? std::optional<std::string>("v") : std::nullopt));
        } else {
          const Failure f = failure({"--" + typed});
          CHECK(f.problem == ArgvProblem::kAmbiguous);
          CHECK(f.word == "--" + typed);
          CHECK(f.candidates == expected);
        }
      }
    }
  }
}

TEST_CASE("short options: -r VALUE, -rVALUE, grouped flags") {
  CHECK(summary({"-r", "3"}) == "redirects=3@-r ");
  CHECK(summary({"-r3"}) == "redirects=3@-r ");
  CHECK(summary({"-r=3"}) == "redirects==3@-r ");  // the rest of the word, '=' included
  CHECK(summary({"-rm"}) == "redirects=m@-r ");
  CHECK(summary({"-m"}) == "module@-m ");
  CHECK(summary({"-hm"}) == "help@-h module@-m ");  // not as Boost: it named -h "--help"
  CHECK(summary({"-hh"}) == "help@-h help@-h ");
  CHECK(summary({"-mr3"}) == "module@-m redirects=3@-r ");  // not as Boost: it named -r "-m"
}

TEST_CASE("a value option that ends a group takes no next word") {
  // Boost split the words first and counted -mr as one word without a value; so does this
  // grammar (not as Boost: it took an option-looking word after -mr as the value).
  for (const Words& words : {Words{"-mr"}, Words{"-mr", "3"}, Words{"-mr", "--nnodes", "2"}}) {
    const Failure f = failure(words);
    CHECK(f.problem == ArgvProblem::kMissingValue);
    CHECK(f.word == "--redirects");
  }
}

TEST_CASE("the entry point: the first word that is not an option, or the word after --") {
  CHECK(summary({"s.py"}) == "| s.py");
  CHECK(summary({"--nnodes", "2", "s.py", "--nnodes", "3"}) == "nnodes=2@--nnodes | s.py");
  CHECK(summary({"-", "x"}) == "| -");
  CHECK(summary({"", "x"}) == "| ");
  CHECK(summary({"--standalone", "--", "--weird.py"}) == "standalone@--standalone | --weird.py");
  CHECK(summary({"--", "--"}) == "| --");
  CHECK(summary({"--"}) == "");
  CHECK(summary({}) == "");
  CHECK(parse({"--nnodes", "2", "s.py", "a"}).entry == 2);
  CHECK(parse({"--", "s.py"}).entry == 1);
  CHECK_FALSE(parse({"--nnodes", "2"}).entry.has_value());
  // Words after the entry point are never looked at.
  CHECK(summary({"s.py", "--bogus", "--nnodes"}) == "| s.py");
}

TEST_CASE("repeated options are all reported, in order") {
  const ArgvParse parsed = parse({"--nnodes", "2", "--nnodes=3", "-m", "--module"});
  REQUIRE(parsed.options.size() == 4);
  CHECK(parsed.options[1].value == "3");
  CHECK(parsed.options[3].spelling == "--module");
}

TEST_CASE("unknown options name the word as written") {
  for (const char* word : {"--bogus", "--bogus=1", "-x", "-mx", "-m3", "-nnodes", "---", "---r",
                           "-/", "-m-", "--=x", "--="}) {
    INFO(word);
    const Failure f = failure({word, "s.py"});
    CHECK(f.problem == ArgvProblem::kUnknown);
    CHECK(f.word == word);
  }
}

TEST_CASE("missing, empty and unexpected values") {
  Failure f = failure({"--nnodes"});
  CHECK(f.problem == ArgvProblem::kMissingValue);
  CHECK(f.word == "--nnodes");
  f = failure({"--nproc"});  // named by the option's canonical name
  CHECK(f.word == "--nproc_per_node");
  f = failure({"-r"});
  CHECK(f.word == "--redirects");
  f = failure({"--nproc-per="});  // named as written
  CHECK(f.problem == ArgvProblem::kEmptyValue);
  CHECK(f.word == "--nproc-per");
  f = failure({"--bogus="});  // an empty value is seen before the name is looked up
  CHECK(f.problem == ArgvProblem::kEmptyValue);
  CHECK(f.word == "--bogus");
  f = failure({"--stand=1"});
  CHECK(f.problem == ArgvProblem::kUnexpectedValue);
  CHECK(f.word == "--standalone");
  f = failure({"--no-python=0"});
  CHECK(f.word == "--no_python");
}

TEST_CASE("the first problem from the left is the one reported") {
  CHECK(failure({"--bogus", "--nnodes"}).problem == ArgvProblem::kUnknown);
  CHECK(failure({"--nnodes", "2", "--rdzv", "--bogus"}).problem == ArgvProblem::kAmbiguous);
  CHECK(failure({"--standalone=1", "--bogus"}).problem == ArgvProblem::kUnexpectedValue);
}

TEST_CASE("ddprun's own table: the messages the launcher prints") {
  using ddprun::launcher::Environment;
  using ddprun::launcher::parse_command_line;
  const auto message = [](const Words& words) -> std::string {
    try {
      parse_command_line(words, Environment{});
    } catch (const ddprun::launcher::UsageError& error) {
      return error.what();
    }
    return "";
  };
  CHECK(message({"--rdzv", "x"}) ==
        "--rdzv: ambiguous abbreviation; expected one of --rdzv_backend, --rdzv_endpoint, "
        "--rdzv_id, --rdzv_conf spelled out");
  CHECK(message({"--no-such", "s.py"}) ==
        "--no-such: unknown option; expected an option listed by ddprun --help before the entry "
        "point (everything after the entry point is passed to it)");
  CHECK(message({"--nproc"}) == "--nproc_per_node: missing value; expected N|cpu|gpu|auto");
  CHECK(message({"-t"}) == "--tee: missing value; expected 0-3|RANK:0-3,...");
  CHECK(message({"--nnodes="}) == "--nnodes: empty value after '='; expected N|MIN:MAX");
  CHECK(message({"--module="}) == "--module: empty value after '='; expected a value");
  CHECK(message({"--nnod="}) == "--nnod: empty value after '='; expected a value");
  CHECK(message({"--print-config=0"}) ==
        "--print_config: takes no value; expected --print_config on its own");
  CHECK(message({"---"}).starts_with("---: unknown option; "));

  const auto parsed = parse_command_line({"--nproc", "2", "-mr3", "s.py", "-x"}, Environment{});
  CHECK(parsed.values.at("nproc_per_node").text == "2");
  CHECK(parsed.values.at("nproc_per_node").shown_as == "--nproc");
  CHECK(parsed.values.at("module").text == "1");
  CHECK(parsed.values.at("redirects").shown_as == "-r");
  CHECK(parsed.entry_point == "s.py");
  CHECK(parsed.entry_args == Words{"-x"});
}
