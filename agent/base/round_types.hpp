#pragma once
// The rendezvous types the agent's supervision code speaks in (defined by rendezvous/round/).

#include "rendezvous/round/round_info.hpp"

namespace ddprun::agent {

using rendezvous::round::RendezvousError;
using rendezvous::round::RoundInfo;
using rendezvous::round::UnixTime;
using rendezvous::round::WorkerFailure;

}  // namespace ddprun::agent
