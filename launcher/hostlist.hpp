#pragma once
// Slurm hostlist expressions (src/common/hostlist.c grammar, one-dimensional clusters):
//   list    := token { (',' | ' ' | '\t' | '\n') token }   commas inside [...] do not split
//   token   := text { '[' ranges ']' text }                 several groups give every combination
//   ranges  := range { ',' range }
//   range   := digits [ '-' digits ]                        lo <= hi; lo's digit count is the
//                                                           zero-padded width ("01-04" -> 01..04)
// e.g. "node[01-03,07],login1" and "rack[1-2]-node[1-2]-ib". Pure: no call to scontrol.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

// A malformed expression: what is wrong and where (0-based offset into the expression).
class HostlistError : public std::runtime_error {
 public:
  HostlistError(const std::string& problem, std::size_t position)
      : std::runtime_error(problem + " at offset " + std::to_string(position)),
        position_(position) {}
  std::size_t position() const { return position_; }

 private:
  std::size_t position_;
};

// Like Slurm, an expression never expands to more than this many hosts.
inline constexpr std::size_t kMaxHostlistHosts = 65536;

// The hosts in order, duplicates kept (as `scontrol show hostnames` prints them).
std::vector<std::string> expand_hostlist(std::string_view expression);

}  // namespace ddprun::launcher
