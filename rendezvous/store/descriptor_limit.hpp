#pragma once
// The descriptor limit (RLIMIT_NOFILE) of a process that holds one descriptor per connection:
// the store daemon, and the scale simulator's agents. Raising it is the caller's choice; the
// decision of what to ask for is pure.

#include <sys/resource.h>

#include <cstddef>
#include <optional>
#include <string>

namespace ddprun::rendezvous::store {

struct DescriptorLimit {
  rlim_t soft = 0;
  rlim_t hard = 0;
};

// What to ask setrlimit for, `wanted` descriptors: a hard limit raised up to min(wanted,
// nr_open) (only a process with CAP_SYS_RESOURCE may raise it), and the soft limit up to it.
DescriptorLimit descriptor_limit_to_ask(DescriptorLimit current, rlim_t wanted, rlim_t nr_open);

// Raises RLIMIT_NOFILE towards `wanted` (first soft and hard, then, when raising the hard limit
// is refused, the soft limit to the hard one). Returns the limit in force afterwards.
DescriptorLimit raise_descriptor_limit(rlim_t wanted);

// How many connections `limit` leaves room for, keeping `spare` descriptors (at least 1).
std::size_t connections_within(DescriptorLimit limit, rlim_t spare);

// nullopt when `limit.soft` covers `needed` descriptors, else a message naming the limit, the
// kernel's fs.nr_open and what to do.
std::optional<std::string> descriptor_shortage(DescriptorLimit limit, rlim_t needed);

}  // namespace ddprun::rendezvous::store
