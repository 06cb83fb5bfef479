#include "launcher/command_line.hpp"

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/argv_parser.hpp"
#include "launcher/option_table.hpp"
#include "launcher/usage_error.hpp"
#include "launcher/value_parsers.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::string_view kUnknownExpected =
    "an option listed by ddprun --help before the entry point (everything after the entry "
    "point is passed to it)";

// The grammar's view of the option table: names, the short letter, and whether a value follows.
std::vector<ArgvOption> argv_options() {
  std::vector<ArgvOption> options;
  options.reserve(option_table().size());
  for (const auto& spec : option_table()) {
    options.push_back(
        ArgvOption{spec.dest, spec.dashed, spec.short_name, spec.kind != OptionKind::kFlag});
  }
  return options;
}

std::string expected_form(std::string_view key) {
  const OptionSpec* spec = find_option(key);
  if (spec == nullptr || spec->value_name.empty())
    return "a value";
  return std::string(spec->value_name);
}

// "nnodes" for "--nnodes": the table key a message's option name stands for.
std::string_view without_dashes(std::string_view name) {
  const std::size_t first = name.find_first_not_of('-');
  return first == std::string_view::npos ? std::string_view() : name.substr(first);
}

[[noreturn]] void throw_usage_error(const ArgvError& error) {
  const std::string& word = error.word();
  switch (error.problem()) {
    case ArgvProblem::kUnknown:
      throw UsageError(word, "unknown option", std::string(kUnknownExpected));
    case ArgvProblem::kAmbiguous: {
      std::string candidates;
      for (const auto& candidate : error.candidates())
        candidates.append(candidates.empty() ? "--" : ", --").append(candidate);
      throw UsageError(word, "ambiguous abbreviation", "one of " + candidates + " spelled out");
    }
    case ArgvProblem::kMissingValue:
      throw UsageError(word, "missing value", expected_form(without_dashes(word)));
    case ArgvProblem::kEmptyValue:
      throw UsageError(word, "empty value after '='", expected_form(without_dashes(word)));
    case ArgvProblem::kUnexpectedValue:
      throw UsageError(word, "takes no value", word + " on its own");
  }
  throw UsageError(word, error.what(), "the forms listed by ddprun --help");
}

// The one place an option's text is read, from the command line or from PET_*. A list or
// mapping wrapped whole in quotes that no shell removed (a YAML job template, Python's
// subprocess.run) loses them here, so every later check sees the list itself. torchrun 2.13
// removes no quotes: a quoted --rdzv-conf starts there only because c10d ignores the keys the
// quotes mangle ("'join_timeout"), a quoted --signals-to-handle loses its first and last name,
// and quoted --redirects, --tee and --local-ranks-filter are refused (README, "Using ddprun").
std::string option_text(const OptionSpec& spec, const std::string& text) {
  if (spec.kind == OptionKind::kList)
    return std::string(without_enclosing_quotes(text));
  return text;
}

}  // namespace

ParsedCommandLine parse_command_line(const std::vector<std::string>& args, const Environment& env) {
  const std::vector<ArgvOption> options = argv_options();
  ArgvParse argv;
  try {
    argv = parse_argv(args, options);
  } catch (const ArgvError& error) {
    throw_usage_error(error);
  }

  ParsedCommandLine parsed;
  for (ArgvOccurrence& option : argv.options) {
    const OptionSpec* spec = find_option(option.name);
    if (spec == nullptr)
      continue;  // cannot happen: every option comes from the table
    RawValue value;
    value.text =
        spec->kind == OptionKind::kFlag ? "1" : option_text(*spec, option.value.value_or(""));
    value.source = "cli";
    value.shown_as = std::move(option.spelling);
    // Repeating an option is fine and the last one wins, as in argparse.
    parsed.values.insert_or_assign(std::move(option.name), std::move(value));
  }

  for (const auto& spec : option_table()) {
    if (!spec.reads_pet || parsed.has(std::string(spec.dest)))
      continue;
    const std::string variable = pet_variable(spec.dest);
    if (auto text = lookup(env, variable)) {
      parsed.values.emplace(std::string(spec.dest),
                            RawValue{option_text(spec, *text), "env:" + variable, variable});
    }
  }

  if (argv.entry) {
    parsed.entry_point = args[*argv.entry];
    parsed.entry_args.assign(args.begin() + static_cast<std::ptrdiff_t>(*argv.entry) + 1,
                             args.end());
  }
  return parsed;
}

}  // namespace ddprun::launcher
