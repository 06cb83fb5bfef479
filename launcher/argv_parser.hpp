#pragma once
// The grammar of ddprun's command line: which words are options (those before the entry point)
// and how an option is written. Pure: words in, options out; what an option means and whether
// its value is good is option_table's and resolve_config's business.
//
// Accepted, as Boost.Program_options accepted them before this parser replaced it (so that the
// launcher links no compiled Boost library and builds from PyPI's header-only packages):
//   --name VALUE, --name=VALUE        either long name of an option (nproc_per_node or
//                                     nproc-per-node)
//   --prefix                          a prefix of the long names of exactly one option, as
//                                     argparse allows (--nproc); an exact name always wins
//   -r VALUE, -rVALUE, -hm            short options; flags may be grouped, and the first option
//                                     of a group that takes a value takes the rest of the word
//   --                                ends the options: the next word is the entry point
// A value option takes the next word whatever it looks like ("--nnodes --x" sets nnodes to
// "--x"), except a short option's exact spelling ("--nnodes -m" is a missing value).

#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

// One option as the grammar sees it.
struct ArgvOption {
  std::string_view name;     // the canonical long name, without dashes: "nproc_per_node"
  std::string_view alias;    // a second long name ("nproc-per-node"), or empty
  char short_name = '\0';    // 'r' for -r, or '\0'
  bool takes_value = false;  // false: a flag
};

// One option found on the command line.
struct ArgvOccurrence {
  std::string name;                  // the canonical long name
  std::optional<std::string> value;  // as written; absent for a flag
  std::string spelling;              // as written, for messages: "--nproc", "-r"
};

struct ArgvParse {
  std::vector<ArgvOccurrence> options;  // in command-line order; a repeated option repeats
  std::optional<std::size_t> entry;     // index of the entry point in the words; none: no words
                                        // after the options
};

enum class ArgvProblem {
  kUnknown,          // no option has this name, or this name as a prefix
  kAmbiguous,        // a prefix of several options' names
  kMissingValue,     // a value option last, or followed by a short option's spelling
  kEmptyValue,       // --name= with nothing after the '='
  kUnexpectedValue,  // --flag=value
};

class ArgvError : public std::runtime_error {
 public:
  ArgvError(ArgvProblem problem, std::string word, std::vector<std::string> candidates = {});

  ArgvProblem problem() const { return problem_; }
  // How a message names the option. kUnknown, kAmbiguous: the word as written ("--rdzv=x",
  // "-mx"); kMissingValue, kUnexpectedValue: "--" and the canonical name; kEmptyValue: "--" and
  // the name as written before the '='.
  const std::string& word() const { return word_; }
  // kAmbiguous: the canonical names of the options the prefix could mean, in table order.
  const std::vector<std::string>& candidates() const { return candidates_; }

 private:
  ArgvProblem problem_;
  std::string word_;
  std::vector<std::string> candidates_;
};

// `words` excludes argv[0]. Throws ArgvError for the first malformed option, left to right.
ArgvParse parse_argv(std::span<const std::string> words, std::span<const ArgvOption> options);

}  // namespace ddprun::launcher
