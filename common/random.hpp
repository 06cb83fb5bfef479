#pragma once
// Unpredictable bytes, and the identifiers made of them (nonces, run ids, file names), from the
// kernel's generator. One source for all of ddprun, so none falls back to something weaker.

#include <cstddef>
#include <string>

namespace ddprun::common {

// `count` bytes from getrandom(), which blocks only before the kernel's pool is initialised at
// boot, long before a job runs. Throws std::runtime_error when the kernel refuses (no
// getrandom, a seccomp filter): a fixed or guessable value would be worse than stopping.
std::string random_bytes(std::size_t count);

// `bytes` random bytes as 2 x bytes lowercase hex digits.
std::string random_hex(std::size_t bytes);

// As Python's uuid.uuid4(): 122 random bits, version 4, RFC 4122 variant, 36 characters.
std::string random_uuid4();

}  // namespace ddprun::common
