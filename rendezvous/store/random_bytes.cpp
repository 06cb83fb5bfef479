#include "rendezvous/store/random_bytes.hpp"

#include <sys/random.h>

#include <cerrno>
#include <random>

namespace ddprun::rendezvous::store {

std::string random_bytes(std::size_t count) {
  std::string bytes(count, '\0');
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      // No getrandom() (a kernel before 3.17): the C++ library's source is the kernel's too.
      std::random_device device;
      for (; filled < bytes.size(); ++filled) {
        bytes[filled] = static_cast<char>(device() & 0xffU);
      }
      break;
    }
    filled += static_cast<std::size_t>(got);
  }
  return bytes;
}

}  // namespace ddprun::rendezvous::store
