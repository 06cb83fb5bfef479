#include "common/signals.hpp"

#include <signal.h>

#include <array>
#include <utility>

namespace ddprun::common {
namespace {

// The names glibc's sigabbrev_np() gives, written out here: that function is glibc 2.32, and the
// portable build links against glibc 2.28 (cmake/zig-toolchain.cmake). The numbers come from
// <signal.h>, so they are this platform's. tests/launcher/value_parsers_test.cpp compares the
// table with sigabbrev_np() wherever the test is built.
constexpr std::array<std::pair<int, std::string_view>, 31> kSignalNames{{
    {SIGHUP, "HUP"},   {SIGINT, "INT"},       {SIGQUIT, "QUIT"}, {SIGILL, "ILL"},
    {SIGTRAP, "TRAP"}, {SIGABRT, "ABRT"},     {SIGBUS, "BUS"},   {SIGFPE, "FPE"},
    {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},     {SIGSEGV, "SEGV"}, {SIGUSR2, "USR2"},
    {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},     {SIGTERM, "TERM"}, {SIGSTKFLT, "STKFLT"},
    {SIGCHLD, "CHLD"}, {SIGCONT, "CONT"},     {SIGSTOP, "STOP"}, {SIGTSTP, "TSTP"},
    {SIGTTIN, "TTIN"}, {SIGTTOU, "TTOU"},     {SIGURG, "URG"},   {SIGXCPU, "XCPU"},
    {SIGXFSZ, "XFSZ"}, {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGWINCH, "WINCH"},
    {SIGPOLL, "POLL"}, {SIGPWR, "PWR"},       {SIGSYS, "SYS"},
}};

std::optional<std::string_view> abbreviation(int signal_number) {
  for (const auto& [number, name] : kSignalNames) {
    if (number == signal_number)
      return name;
  }
  return std::nullopt;
}

}  // namespace

std::string signal_name(int signal_number) {
  const auto abbrev = abbreviation(signal_number);
  if (!abbrev)
    return "SIG" + std::to_string(signal_number);
  return std::string("SIG").append(*abbrev);
}

std::optional<int> signal_number(std::string_view name) {
  if (!name.starts_with("SIG"))
    return std::nullopt;
  name.remove_prefix(3);
  for (const auto& [number, abbrev] : kSignalNames) {
    if (name == abbrev)
      return number;
  }
  return std::nullopt;
}

}  // namespace ddprun::common
