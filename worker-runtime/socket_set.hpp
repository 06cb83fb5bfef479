#pragma once
// The sockets a process group opened, and their hard stop. c10d's ProcessGroupGloo has no abort
// (pytorch#130345): a collective blocked on a peer that is gone or stuck waits out its timeout.
// Shutting down the group's own sockets (never closing them: their owner still holds the
// descriptors) fails every pending operation at once, here and on the peers at the other end,
// which is the abort live recovery needs. The sockets are found by difference: those open after
// the group was built that were not open before, told apart by inode, as a descriptor number is
// reused once an older socket (a previous group's, released late) is closed.
#include <sys/types.h>

#include <map>
#include <set>

namespace ddprun::train {

// This process's open sockets (from /proc/self/fd): descriptor -> inode.
using SocketSet = std::map<int, ino_t>;
SocketSet open_sockets();

// The descriptors of the sockets in `after` that were not in `before`.
std::set<int> sockets_opened_between(const SocketSet& before, const SocketSet& after);

// shutdown(SHUT_RDWR) on each connected one (listening sockets are left alone); errors (a socket
// already closed) are of no interest.
void shut_down_sockets(const std::set<int>& sockets);

}  // namespace ddprun::train
