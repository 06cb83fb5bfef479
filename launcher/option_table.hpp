#pragma once
// Every option ddprun accepts, in one table: the torchrun options (both spellings, same
// defaults, PET_* variables) and the ddprun extras. The command-line grammar's option list
// (command_line.cpp) and the --help text are both generated from it, so they cannot drift apart.

#include <span>
#include <string>
#include <string_view>

namespace ddprun::launcher {

enum class OptionKind {
  kValue,  // takes one value: --nnodes 2, --nnodes=2, -r3
  kList,   // takes one value that is a list or a mapping (--rdzv-conf a=1,b=2, -r 0:1,1:2);
           // wrapped whole in quotes, on the command line or in PET_*, it is read without
           // them (without_enclosing_quotes, applied once where values are read)
  kFlag,   // takes none; PET_<NAME>=0/1 sets its default
};

// The --help sections, in the order they are printed.
enum class OptionGroup { kNodes, kWorkers, kRestarts, kLogs, kEntry, kExtras };

struct OptionSpec {
  std::string_view dest;    // underscore spelling without dashes; the key everywhere
  std::string_view dashed;  // the dash spelling, or empty when there is only one
  char short_name;          // 'r' for -r, or '\0'
  OptionKind kind;
  OptionGroup group;
  bool reads_pet;               // PET_<DEST> supplies the default
  std::string_view value_name;  // placeholder shown in --help
  std::string_view help;        // one or two sentences for a user
};

std::span<const OptionSpec> option_table();

// The spec whose dest is `dest`; nullptr when there is none.
const OptionSpec* find_option(std::string_view dest);

// "PET_NPROC_PER_NODE" for "nproc_per_node".
std::string pet_variable(std::string_view dest);

// "--nproc-per-node" (the dash spelling when there is one), for messages.
std::string display_name(const OptionSpec& spec);

std::string_view group_title(OptionGroup group);

}  // namespace ddprun::launcher
