#pragma once
// The drivers wait on descriptors they do not own (a FIFO, pipes, a capture runner's pidfds):
// each wait gets a duplicate, so the Asio object closes its own and the owner keeps the original.

#include <unistd.h>

#include <memory>
#include <stdexcept>

#include "rendezvous/store/asio.hpp"

namespace ddprun::agent {

using Descriptor = boost::asio::posix::stream_descriptor;

inline std::unique_ptr<Descriptor> wait_on(boost::asio::io_context& io, int fd) {
  const int copy = ::dup(fd);
  if (copy < 0)
    throw std::runtime_error("dup failed while setting up a wait on a descriptor");
  return std::make_unique<Descriptor>(io, copy);
}

}  // namespace ddprun::agent
