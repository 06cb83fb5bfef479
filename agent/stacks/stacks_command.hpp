#pragma once
// `ddprun stacks`: asks every node of a running job for its workers' stacks and prints where
// each node wrote them. The agents capture them as a hang does (py-spy, eu-stack or gdb, as
// found), without signalling anyone: the job goes on. Works through the job's rendezvous
// (c10d, static or etcd), on the round running now.

#include <chrono>
#include <ostream>

#include "agent/base/agent_config.hpp"

namespace ddprun::agent {

// How long the nodes have to answer (a capture is bounded by 10 s on each node).
inline constexpr std::chrono::seconds kStacksAnswerLimit{30};

// Returns the exit status: 0 when every node of the round answered, 1 otherwise (with a
// message on err naming what is missing).
int request_stacks(const RendezvousConfig& config, std::ostream& out, std::ostream& err);

}  // namespace ddprun::agent
