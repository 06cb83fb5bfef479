#pragma once
// The one kind of error the command line reports: which option (or environment variable) is
// wrong, what is wrong with it, and the form it accepts. main() prints it as one line,
// `ddprun: error: <option>: <problem>; expected <form>`, and exits with status 2.

#include <stdexcept>
#include <string>

namespace ddprun::launcher {

class UsageError : public std::runtime_error {
 public:
  UsageError(std::string option, std::string problem, std::string expected)
      : std::runtime_error(option + ": " + problem + "; expected " + expected),
        option_(std::move(option)) {}

  const std::string& option() const { return option_; }

 private:
  std::string option_;
};

}  // namespace ddprun::launcher
