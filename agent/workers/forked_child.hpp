#pragma once
// The first steps of every process the agent forks (workers, stack-capture tools), between fork
// and exec. The agent has other threads, so only async-signal-safe calls are made here: no
// allocation, no locks, nothing that touches a std::string's heap.

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <string_view>

namespace ddprun::agent {

// Makes the child die with the agent even when the agent is SIGKILLed (PR_SET_PDEATHSIG); exits
// 1 at once when the agent already died between fork and here, as nobody would kill it later.
void die_with_agent(pid_t agent_pid);

// Undoes what exec would otherwise carry over from the agent: its ignored SIGPIPE and its
// blocked signals (the agent blocks the ones it reads from a signalfd); and resets caught
// signals to their default before the mask opens, as exec would.
void restore_signals(const sigset_t& mask);

// Closes every descriptor from `first` on: what the agent holds (sockets, pipes) is not the
// child's. The system call itself (Linux 5.9), not glibc's wrapper, which glibc 2.34 added: the
// portable build targets glibc 2.28 (cmake/zig-toolchain.cmake).
void close_descriptors_from(unsigned first);

// write(2) until all is written or the descriptor fails; the child has nothing to do on failure.
void write_all_raw(int fd, std::string_view text);

// Prints "<prefix><strerror(error)>" on stderr and exits 127, as a shell does for a command it
// cannot run.
[[noreturn]] void exit_with_reason(std::string_view prefix, int error);

}  // namespace ddprun::agent
