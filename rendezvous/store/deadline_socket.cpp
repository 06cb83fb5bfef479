#include "rendezvous/store/deadline_socket.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace ddprun::rendezvous::store {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { ::freeaddrinfo(info); }
};

int milliseconds_until(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) {
    return 0;
  }
  return left.count() > 1000000 ? 1000000 : static_cast<int>(left.count());
}

std::string errno_text(int error) {
  return std::strerror(error);
}

}  // namespace

DeadlineSocket::DeadlineSocket(DeadlineSocket&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

DeadlineSocket& DeadlineSocket::operator=(DeadlineSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DeadlineSocket::~DeadlineSocket() {
  close();
}

void DeadlineSocket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

namespace {
bool connected_to_itself(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_length = sizeof(local);
  socklen_t peer_length = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
    return false;
  }
  return local_length == peer_length && std::memcmp(&local, &peer, local_length) == 0;
}
}  // namespace

DeadlineSocket DeadlineSocket::connect(const std::string& host, std::uint16_t port,
                                       Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const std::string service = std::to_string(port);
  const int resolved = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &raw);
  if (resolved != 0) {
    throw SocketBroken("cannot resolve " + host + ": " + ::gai_strerror(resolved));
  }
  const std::unique_ptr<addrinfo, AddrInfoDeleter> addresses(raw);
  std::string last_error = "no address";
  for (const addrinfo* address = addresses.get(); address != nullptr; address = address->ai_next) {
    DeadlineSocket socket(::socket(address->ai_family,
                                   address->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                                   address->ai_protocol));
    if (!socket.is_open()) {
      last_error = errno_text(errno);
      continue;
    }
    if (::connect(socket.fd_, address->ai_addr, address->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = errno_text(errno);
        continue;
      }
      if (!socket.poll_for(POLLOUT, deadline)) {
        last_error = "connect timed out";
        continue;
      }
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(socket.fd_, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        last_error = errno_text(error);
        continue;
      }
    }
    if (connected_to_itself(socket.fd_)) {
      // Linux can pair a connect to an unbound local port with itself (simultaneous open); the
      // socket would then hold the port the store is about to bind.
      last_error = "connected to itself (nothing listens there yet)";
      continue;
    }
    const int enable = 1;
    ::setsockopt(socket.fd_, IPPROTO_TCP, TCP_NODELAY, &enable, sizeof(enable));
    return socket;
  }
  throw SocketBroken("cannot connect to " + host + ":" + service + ": " + last_error);
}

bool DeadlineSocket::poll_for(short events, Deadline deadline) {
  while (true) {
    pollfd entry{fd_, events, 0};
    const int ready = ::poll(&entry, 1, milliseconds_until(deadline));
    if (ready > 0) {
      return true;
    }
    if (ready == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      continue;
    }
    if (errno != EINTR) {
      throw SocketBroken("poll failed: " + errno_text(errno));
    }
  }
}

bool DeadlineSocket::is_stale() {
  if (fd_ < 0) {
    return true;
  }
  pollfd entry{fd_, POLLIN, 0};
  const int ready = ::poll(&entry, 1, 0);
  return ready != 0;  // readable (EOF, error, stray bytes) or poll failed
}

bool DeadlineSocket::wait_readable(Deadline deadline) {
  return poll_for(POLLIN, deadline);
}

void DeadlineSocket::send_all(std::string_view bytes, Deadline deadline) {
  if (fd_ < 0) {
    throw SocketBroken("not connected");
  }
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t result =
        ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (result > 0) {
      sent += static_cast<std::size_t>(result);
      continue;
    }
    if (result < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!poll_for(POLLOUT, deadline)) {
        throw SocketTimeout("send timed out");
      }
      continue;
    }
    if (result < 0 && errno == EINTR) {
      continue;
    }
    throw SocketBroken("send failed: " + errno_text(errno));
  }
}

void DeadlineSocket::receive_exact(void* destination, std::size_t size, Deadline deadline) {
  if (fd_ < 0) {
    throw SocketBroken("not connected");
  }
  auto* bytes = static_cast<char*>(destination);
  std::size_t received = 0;
  while (received < size) {
    const ssize_t result = ::recv(fd_, bytes + received, size - received, MSG_DONTWAIT);
    if (result > 0) {
      received += static_cast<std::size_t>(result);
      continue;
    }
    if (result == 0) {
      throw SocketBroken("the server closed the connection");
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!poll_for(POLLIN, deadline)) {
        throw SocketTimeout("receive timed out");
      }
      continue;
    }
    if (errno != EINTR) {
      throw SocketBroken("receive failed: " + errno_text(errno));
    }
  }
}

}  // namespace ddprun::rendezvous::store
