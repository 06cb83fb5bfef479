#pragma once
// What the tests that fork and exec a program hand to execve(): argv and envp, each an array of
// char* ending with a null pointer, over strings that must outlive the call.

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ddprun::testing {

// Strings and the null-terminated char* array over them that execve() takes as argv or envp.
// Made before fork, so that the child allocates nothing.
class ExecArgs {
 public:
  explicit ExecArgs(std::vector<std::string> strings) : strings_(std::move(strings)) {
    pointers_.reserve(strings_.size() + 1);
    for (auto& text : strings_)
      pointers_.push_back(text.data());
    pointers_.push_back(nullptr);
  }
  // The pointers point into the strings: a copy would point into the original's.
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;

  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// "NAME=value" for each variable, the form of envp's entries.
inline std::vector<std::string> environment_entries(
    const std::map<std::string, std::string>& variables) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : variables)
    entries.push_back(name + "=" + value);
  return entries;
}

}  // namespace ddprun::testing
