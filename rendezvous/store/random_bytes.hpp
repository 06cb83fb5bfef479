#pragma once
// Unpredictable bytes for the job secret's nonces, from the kernel's generator.

#include <cstddef>
#include <string>

namespace ddprun::rendezvous::store {

// `count` bytes from getrandom(); it blocks only before the pool is initialised at boot, long
// before a job runs.
std::string random_bytes(std::size_t count);

}  // namespace ddprun::rendezvous::store
