#pragma once
// Step 1 of the launcher: split argv into ddprun's options and the entry point with its
// arguments (everything from the entry point on belongs to the script, as argparse.REMAINDER
// does in torchrun) with the grammar of argv_parser.hpp, then fill the options that were not
// given from PET_<NAME> variables. Values stay text here; resolve_config checks them.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/environment.hpp"

namespace ddprun::launcher {

// One option's value as the user supplied it.
struct RawValue {
  std::string text;      // flags: "1" from the command line, the PET_X text from the env
  std::string source;    // "cli" or "env:PET_X"
  std::string shown_as;  // how messages name it: "--nproc_per_node" or "PET_NPROC_PER_NODE"
};

struct ParsedCommandLine {
  std::map<std::string, RawValue> values;  // by option dest; absent: not given anywhere
  std::optional<std::string> entry_point;  // script, module, program, or "train"
  std::vector<std::string> entry_args;     // untouched

  bool has(const std::string& dest) const { return values.contains(dest); }
};

// `args` excludes argv[0]. Throws UsageError for unknown, ambiguous or malformed options.
// A missing entry point is not an error here (--help and --version need none).
ParsedCommandLine parse_command_line(const std::vector<std::string>& args, const Environment& env);

}  // namespace ddprun::launcher
