#pragma once
// A bounded HTTP/1.0 exchange with a server on 127.0.0.1, for the health port's tests.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ddprun::agent::e2e {

struct HttpReply {
  int status = 0;
  nlohmann::json body;  // null when the body is not JSON
  std::string text;
  std::string head;  // status line and headers
};

// One exchange with the server on 127.0.0.1:port: send `request`, close our side, read the whole
// answer (bounded). Nothing when the server cannot be reached or does not answer in time.
inline std::optional<HttpReply> http_exchange(uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  const timeval limit{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  std::size_t sent = 0;
  while (sent < request.size()) {
    const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    sent += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[4096];
  for (;;) {
    const auto n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0)
      break;
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (!answer.starts_with("HTTP/1.0 ") || answer.size() < 12)
    return std::nullopt;
  HttpReply reply;
  reply.status = std::stoi(answer.substr(9, 3));
  const auto body_at = answer.find("\r\n\r\n");
  reply.text = body_at == std::string::npos ? "" : answer.substr(body_at + 4);
  reply.head = answer.substr(0, body_at);
  reply.body = nlohmann::json::parse(reply.text, nullptr, /*allow_exceptions=*/false);
  return reply;
}

}  // namespace ddprun::agent::e2e
