#pragma once
// Console and log writes of the agent: everything, or nothing more once the descriptor fails.

#include <cstddef>

namespace ddprun::agent {

// Writes everything, retrying on EINTR and short writes (waiting up to a second for a full
// non-blocking pipe at a time); gives up silently on other errors (a closed console must not
// stop the job).
void write_fully(int fd, const char* data, std::size_t size);

}  // namespace ddprun::agent
