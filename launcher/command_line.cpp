#include "launcher/command_line.hpp"

#include <boost/program_options.hpp>
#include <cstddef>
#include <memory>
#include <string_view>

#include "launcher/option_table.hpp"
#include "launcher/usage_error.hpp"
#include "launcher/value_parsers.hpp"

namespace ddprun::launcher {
namespace po = boost::program_options;
namespace {

constexpr std::string_view kUnknownExpected =
    "an option listed by ddprun --help before the entry point (everything after the entry "
    "point is passed to it)";

po::options_description make_description() {
  po::options_description description;
  for (const auto& spec : option_table()) {
    // Boost reports every spelling under the first long name, so the dest comes first.
    std::string names(spec.dest);
    if (!spec.dashed.empty())
      names.append(",").append(spec.dashed);
    if (spec.short_name != '\0')
      names.append(1, ',').append(1, spec.short_name);
    // Boost only tokenizes: the text is validated later, with messages that name the form.
    // Nothing is store()d, so repeating an option is fine and the last one wins, as in
    // argparse.
    // untyped_value: one token or none, no conversion. add_options() takes ownership of the
    // raw pointer (Boost's interface), hence the release().
    auto semantic = std::make_unique<po::untyped_value>(spec.kind == OptionKind::kFlag);
    description.add_options()(names.c_str(), semantic.release(), "");
  }
  return description;
}

bool takes_value(const po::options_description& description, const std::string& name) {
  try {
    const po::option_description* found =
        description.find_nothrow(name, /*approx=*/true, false, false);
    return found != nullptr && found->semantic()->max_tokens() > 0;
  } catch (const po::error&) {
    return false;  // ambiguous: Boost reports it when it parses the options
  }
}

// Index of the entry point in `args` (args.size() when there is none) and whether a "--"
// just before it must be dropped. Only options before the entry point are ddprun's.
struct Split {
  std::size_t entry = 0;
  std::size_t options_end = 0;
};

Split find_entry_point(const std::vector<std::string>& args,
                       const po::options_description& description) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--")
      return {i + 1, i};
    if (token.size() > 2 && token.starts_with("--")) {
      if (token.find('=') != std::string::npos)
        continue;
      if (takes_value(description, token.substr(2)))
        ++i;
      continue;
    }
    if (token.size() >= 2 && token[0] == '-') {
      // -r3 carries its value; -r 3 takes the next token.
      if (token.size() == 2 && takes_value(description, token))
        ++i;
      continue;
    }
    return {i, i};  // the first word that is not an option ("-" included, as in argparse)
  }
  return {args.size(), args.size()};
}

std::string option_token_name(const po::option& option) {
  if (option.original_tokens.empty())
    return std::string("--").append(option.string_key);
  std::string token = option.original_tokens.front();
  if (token.starts_with("--"))
    return token.substr(0, token.find('='));
  return token.substr(0, 2);
}

std::string expected_form(const std::string& key) {
  const OptionSpec* spec = find_option(key);
  if (spec == nullptr || spec->value_name.empty())
    return "a value";
  return std::string(spec->value_name);
}

[[noreturn]] void rethrow_as_usage_error(const po::error& error) {
  if (const auto* unknown = dynamic_cast<const po::unknown_option*>(&error)) {
    throw UsageError(unknown->get_option_name(), "unknown option", std::string(kUnknownExpected));
  }
  if (const auto* ambiguous = dynamic_cast<const po::ambiguous_option*>(&error)) {
    std::string candidates;
    for (const auto& alternative : ambiguous->alternatives()) {
      candidates.append(candidates.empty() ? "--" : ", --").append(alternative);
    }
    throw UsageError(ambiguous->get_option_name(), "ambiguous abbreviation",
                     "one of " + candidates + " spelled out");
  }
  if (const auto* syntax = dynamic_cast<const po::invalid_command_line_syntax*>(&error)) {
    const std::string name = syntax->get_option_name();
    std::string key = name;
    while (key.starts_with("-"))
      key.erase(0, 1);
    switch (syntax->kind()) {
      case po::invalid_syntax::missing_parameter:
        throw UsageError(name, "missing value", expected_form(key));
      case po::invalid_syntax::empty_adjacent_parameter:
        throw UsageError(name, "empty value after '='", expected_form(key));
      case po::invalid_syntax::extra_parameter:
        throw UsageError(name, "takes no value", std::string(name).append(" on its own"));
      default:
        throw UsageError(name.empty() ? "command line" : name, syntax->what(),
                         "the forms listed by ddprun --help");
    }
  }
  throw UsageError("command line", error.what(), "the forms listed by ddprun --help");
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
  const po::options_description description = make_description();
  const Split split = find_entry_point(args, description);

  ParsedCommandLine parsed;
  const std::vector<std::string> option_args(
      args.begin(), args.begin() + static_cast<std::ptrdiff_t>(split.options_end));
  try {
    const po::parsed_options options =
        po::command_line_parser(option_args).options(description).run();
    for (const po::option& option : options.options) {
      const OptionSpec* spec = find_option(option.string_key);
      if (spec == nullptr)
        continue;  // cannot happen: every option comes from the table
      RawValue value;
      value.text = spec->kind == OptionKind::kFlag ? "1"
                   : option.value.empty()          ? ""
                                                   : option_text(*spec, option.value.back());
      value.source = "cli";
      value.shown_as = option_token_name(option);
      parsed.values.insert_or_assign(option.string_key, std::move(value));
    }
  } catch (const po::error& error) {
    rethrow_as_usage_error(error);
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

  if (split.entry < args.size()) {
    parsed.entry_point = args[split.entry];
    parsed.entry_args.assign(args.begin() + static_cast<std::ptrdiff_t>(split.entry) + 1,
                             args.end());
  }
  return parsed;
}

}  // namespace ddprun::launcher
