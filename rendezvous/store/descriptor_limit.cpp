#include "rendezvous/store/descriptor_limit.hpp"

#include <algorithm>
#include <fstream>

namespace ddprun::rendezvous::store {
namespace {

// fs.nr_open: the most any process may set RLIMIT_NOFILE to (the kernel's default, 2^20, when
// it cannot be read).
rlim_t kernel_nr_open() {
  std::ifstream file("/proc/sys/fs/nr_open");
  rlim_t value = 0;
  if (file >> value && value > 0) {
    return value;
  }
  return rlim_t{1} << 20;
}

DescriptorLimit current_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return {};
  }
  return {limit.rlim_cur, limit.rlim_max};
}

bool apply(DescriptorLimit limit) {
  const rlimit wanted{limit.soft, limit.hard};
  return ::setrlimit(RLIMIT_NOFILE, &wanted) == 0;
}

}  // namespace

DescriptorLimit descriptor_limit_to_ask(DescriptorLimit current, rlim_t wanted, rlim_t nr_open) {
  const rlim_t target = std::min(wanted, nr_open);
  const rlim_t hard = std::max(current.hard, target);
  return {std::max(current.soft, std::min(target, hard)), hard};
}

DescriptorLimit raise_descriptor_limit(rlim_t wanted) {
  const DescriptorLimit current = current_limit();
  const DescriptorLimit asked = descriptor_limit_to_ask(current, wanted, kernel_nr_open());
  if (asked.hard != current.hard && apply(asked)) {
    return current_limit();
  }
  // Without CAP_SYS_RESOURCE the hard limit stays: take the soft limit up to it.
  apply(descriptor_limit_to_ask(current, wanted, current.hard));
  return current_limit();
}

std::size_t connections_within(DescriptorLimit limit, rlim_t spare) {
  return limit.soft > spare ? static_cast<std::size_t>(limit.soft - spare) : 1;
}

std::optional<std::string> descriptor_shortage(DescriptorLimit limit, rlim_t needed) {
  if (limit.soft >= needed) {
    return std::nullopt;
  }
  return "needs about " + std::to_string(needed) + " descriptors, but RLIMIT_NOFILE is " +
         std::to_string(limit.soft) + " (hard limit " + std::to_string(limit.hard) +
         ", fs.nr_open " + std::to_string(kernel_nr_open()) +
         "); raising the hard limit needs CAP_SYS_RESOURCE (root outside a restricted "
         "container), or run with a higher `ulimit -Hn`";
}

}  // namespace ddprun::rendezvous::store
