#include "bench/store/load_connection.hpp"

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

namespace ddprun::bench::store {

OwnedFd start_connect(const sockaddr_in& server, int& error) {
  OwnedFd socket(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket) {
    error = errno;
    return socket;
  }
  const int one = 1;
  ::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const linger reset_on_close{1, 0};
  ::setsockopt(socket.get(), SOL_SOCKET, SO_LINGER, &reset_on_close, sizeof(reset_on_close));
  if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&server), sizeof(server)) != 0 &&
      errno != EINPROGRESS) {
    error = errno;
    return OwnedFd();
  }
  error = 0;
  return socket;
}

void LoadConnection::reset() {
  socket_.reset();
  output_.clear();
  sent_ = 0;
  input_.clear();
  pending_.clear();
}

bool LoadConnection::flush() {
  while (sent_ < output_.size()) {
    const ssize_t sent =
        ::send(socket_.get(), output_.data() + sent_, output_.size() - sent_, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        break;
      }
      return false;
    }
    sent_ += static_cast<std::size_t>(sent);
  }
  if (sent_ == output_.size()) {
    output_.clear();
    sent_ = 0;
  }
  return true;
}

LoadConnection::ReadStatus LoadConnection::read_into(std::span<std::uint8_t> scratch,
                                                     std::size_t& received) {
  while (true) {
    const ssize_t got = ::recv(socket_.get(), scratch.data(), scratch.size(), 0);
    if (got > 0) {
      received = static_cast<std::size_t>(got);
      return ReadStatus::ok;
    }
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return ReadStatus::would_block;
    }
    return ReadStatus::closed;
  }
}

}  // namespace ddprun::bench::store
