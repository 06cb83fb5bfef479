#include "launcher/argv_parser.hpp"

#include <utility>

namespace ddprun::launcher {
namespace {

std::string_view problem_text(ArgvProblem problem) {
  switch (problem) {
    case ArgvProblem::kUnknown:
      return "unknown option";
    case ArgvProblem::kAmbiguous:
      return "ambiguous abbreviation";
    case ArgvProblem::kMissingValue:
      return "missing value";
    case ArgvProblem::kEmptyValue:
      return "empty value after '='";
    case ArgvProblem::kUnexpectedValue:
      return "takes no value";
  }
  return "malformed option";
}

enum class NameMatch { kNone, kPrefix, kExact };

NameMatch match_long_name(const ArgvOption& option, std::string_view typed) {
  NameMatch match = NameMatch::kNone;
  for (const std::string_view name : {option.name, option.alias}) {
    if (name.empty())
      continue;
    if (name == typed)
      return NameMatch::kExact;
    if (name.starts_with(typed))
      match = NameMatch::kPrefix;
  }
  return match;
}

// The option a long name typed after "--" means: the one it spells out, else the only one whose
// long names it begins. Throws kAmbiguous (naming `word`) when it begins several options' names.
const ArgvOption* find_long(std::span<const ArgvOption> options, std::string_view typed,
                            const std::string& word) {
  const ArgvOption* prefix_of = nullptr;
  std::vector<std::string> candidates;
  for (const ArgvOption& option : options) {
    switch (match_long_name(option, typed)) {
      case NameMatch::kExact:
        return &option;
      case NameMatch::kPrefix:
        prefix_of = &option;
        candidates.emplace_back(option.name);
        break;
      case NameMatch::kNone:
        break;
    }
  }
  if (candidates.size() > 1)
    throw ArgvError(ArgvProblem::kAmbiguous, word, std::move(candidates));
  return prefix_of;
}

const ArgvOption* find_short(std::span<const ArgvOption> options, char letter) {
  for (const ArgvOption& option : options) {
    if (option.short_name != '\0' && option.short_name == letter)
      return &option;
  }
  return nullptr;
}

bool is_short_spelling(std::span<const ArgvOption> options, std::string_view word) {
  return word.size() == 2 && word[0] == '-' && find_short(options, word[1]) != nullptr;
}

std::string long_spelling(std::string_view name) {
  return std::string("--").append(name);
}

// "--name=" (or "--="): a long option word with nothing after its first '='.
bool has_empty_value(std::string_view word) {
  return word.size() > 2 && word.starts_with("--") && word.find('=') == word.size() - 1;
}

// Walks the words once, left to right; each option word is consumed with the value it takes.
class Walk {
 public:
  Walk(std::span<const std::string> words, std::span<const ArgvOption> options)
      : words_(words), options_(options) {}

  ArgvParse run() {
    while (next_ < words_.size()) {
      const std::string& word = words_[next_];
      if (word == "--") {
        if (next_ + 1 < words_.size())
          parse_.entry = next_ + 1;
        break;
      }
      if (word.size() > 2 && word.starts_with("--")) {
        ++next_;
        read_long(word);
      } else if (word.size() >= 2 && word[0] == '-') {
        ++next_;
        read_short_group(word);
      } else {
        // The first word that is not an option, "-" included, as in argparse.
        parse_.entry = next_;
        break;
      }
    }
    return std::move(parse_);
  }

 private:
  // --name, --name=VALUE, --prefix.
  void read_long(const std::string& word) {
    const std::size_t equals = word.find('=');
    const std::string_view typed = std::string_view(word).substr(2, equals - 2);
    if (typed.empty())
      throw ArgvError(ArgvProblem::kUnknown, word);  // "--=", "--=x"
    // An empty value is reported before the name is looked up, as Boost did: "--bogus=" too.
    if (has_empty_value(word))
      throw ArgvError(ArgvProblem::kEmptyValue, long_spelling(typed));
    const ArgvOption* option = find_long(options_, typed, word);
    if (option == nullptr)
      throw ArgvError(ArgvProblem::kUnknown, word);

    ArgvOccurrence found{std::string(option->name), std::nullopt, word.substr(0, equals)};
    if (equals != std::string::npos) {
      if (!option->takes_value)
        throw ArgvError(ArgvProblem::kUnexpectedValue, long_spelling(option->name));
      found.value = word.substr(equals + 1);
    } else if (option->takes_value) {
      found.value = take_value_word(*option);
    }
    parse_.options.push_back(std::move(found));
  }

  // -r VALUE, -rVALUE, -h, and flags grouped in one word (-hm), the last of which may take a
  // value (-mr3, -mr 3).
  void read_short_group(const std::string& word) {
    for (std::size_t letter = 1; letter < word.size(); ++letter) {
      const ArgvOption* option = find_short(options_, word[letter]);
      if (option == nullptr)
        throw ArgvError(ArgvProblem::kUnknown, word);
      ArgvOccurrence found{std::string(option->name), std::nullopt, std::string{'-', word[letter]}};
      if (option->takes_value) {
        // Only a word of its own takes the next word as its value: -r 3, -mr3, but -mr 3 is a
        // missing value (Boost's split counted -mr as one option word).
        if (letter + 1 < word.size())
          found.value = word.substr(letter + 1);
        else if (letter == 1)
          found.value = take_value_word(*option);
        else
          throw ArgvError(ArgvProblem::kMissingValue, long_spelling(option->name));
        parse_.options.push_back(std::move(found));
        return;
      }
      parse_.options.push_back(std::move(found));
    }
  }

  // The word after a value option is its value, unless there is none or it is a short option
  // written alone (-m): then the value is missing. A next word "--name=" is an empty value of
  // this option (Boost read it as an option, found it empty, and named the option before it).
  std::string take_value_word(const ArgvOption& option) {
    if (next_ >= words_.size() || is_short_spelling(options_, words_[next_]))
      throw ArgvError(ArgvProblem::kMissingValue, long_spelling(option.name));
    if (has_empty_value(words_[next_]))
      throw ArgvError(ArgvProblem::kEmptyValue, long_spelling(option.name));
    return words_[next_++];
  }

  std::span<const std::string> words_;
  std::span<const ArgvOption> options_;
  std::size_t next_ = 0;
  ArgvParse parse_;
};

}  // namespace

ArgvError::ArgvError(ArgvProblem problem, std::string word, std::vector<std::string> candidates)
    : std::runtime_error(word + ": " + std::string(problem_text(problem))),
      problem_(problem),
      word_(std::move(word)),
      candidates_(std::move(candidates)) {}

ArgvParse parse_argv(std::span<const std::string> words, std::span<const ArgvOption> options) {
  return Walk(words, options).run();
}

}  // namespace ddprun::launcher
