// TORCHELASTIC_HEALTH_CHECK_PORT: the real ddprun serves its health over HTTP; a real client
// asks. The agent's loop is stalled for real (ptrace stops only its main thread, the loop's),
// so the server, on its own thread, must report 503 on its own, then 200 once the loop runs.

#include <sys/ptrace.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/health/health_http.hpp"
#include "tests/agent/e2e_support.hpp"

using namespace ddprun::agent::e2e;
using ddprun::agent::classify_request;
using ddprun::agent::end_of_head;
using ddprun::agent::HealthRequest;

namespace {

struct HttpReply {
  int status = 0;
  nlohmann::json body;  // null when the body is not JSON
  std::string text;
};

// One exchange with the server on 127.0.0.1:port: send `request`, close our side, read the whole
// answer (bounded). Nothing when the server cannot be reached or does not answer in time.
std::optional<HttpReply> http_exchange(uint16_t port, const std::string& request) {
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
  reply.body = nlohmann::json::parse(reply.text, nullptr, /*allow_exceptions=*/false);
  return reply;
}

std::optional<HttpReply> get_health(uint16_t port) {
  return http_exchange(port, "GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n");
}

// Asks until `wanted` holds for an answer (a server polled from outside has no event to await).
template <class Wanted>
std::optional<HttpReply> poll_health(uint16_t port, Wanted wanted,
                                     std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::optional<HttpReply> last;
  while (Clock::now() < deadline) {
    last = get_health(port);
    if (last && wanted(*last))
      return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return last;
}

bool two_running(const HttpReply& reply) {
  return reply.status == 200 && reply.body.is_object() &&
         reply.body.value("workers", nlohmann::json()) ==
             nlohmann::json{{"0", "running"}, {"1", "running"}};
}

}  // namespace

TEST_CASE("health requests: where a head ends and what it asks for; junk is never an error") {
  CHECK(end_of_head("GET / HTTP/1.0\r\n") == std::string::npos);
  CHECK(end_of_head("GET / HTTP/1.0\r\n\r\n") == 18);
  CHECK(end_of_head("GET / HTTP/1.0\n\nextra") == 16);
  CHECK(classify_request("GET /health HTTP/1.1\r\nHost: x\r\n\r\n") == HealthRequest::kGet);
  CHECK(classify_request("GET / HTTP/1.0\n\n") == HealthRequest::kGet);
  CHECK(classify_request("POST /health HTTP/1.1\r\n\r\n") == HealthRequest::kOtherVerb);
  CHECK(classify_request("HEAD / HTTP/1.1\r\n\r\n") == HealthRequest::kOtherVerb);
  for (const char* junk : {"", "\r\n\r\n", "GET\r\n\r\n", "GET /\r\n\r\n", " GET / HTTP/1.0\r\n",
                           "get / HTTP/1.0\r\n", "GET / FTP/1.0\r\n", "\x16\x03\x01\x02\x00"}) {
    INFO(junk);
    CHECK(classify_request(junk) == HealthRequest::kMalformed);
  }
}

TEST_CASE(
    "TORCHELASTIC_HEALTH_CHECK_PORT: 200 while the agent's loop runs, 503 while it is "
    "stalled, 200 again after; junk gets 400/405 and the server goes on") {
  TempDir dir;
  const uint16_t port = free_port("0.0.0.0");
  const std::string go = dir / "go";
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "2", "--no_python", "/bin/sh",
                 "-c", "while [ ! -e '" + go + "' ]; do sleep 0.1; done"},
                dir / "agent.out",
                {{"TORCHELASTIC_HEALTH_CHECK_PORT", std::to_string(port)},
                 {"DDPRUN_HEALTH_CHECK_TIMEOUT", "2"}});

  const auto running = poll_health(port, two_running, std::chrono::seconds(30));
  REQUIRE(running);
  INFO(running->text);
  REQUIRE(two_running(*running));
  CHECK(running->body["alive"] == true);
  CHECK(running->body["stale_after_s"] == 2.0);
  CHECK(running->body["round"].is_number_unsigned());
  CHECK(running->body["restarts"] == 0);
  CHECK(running->body["last_progress_unix"].is_number_integer());
  INFO("200 body: " << running->text);

  {  // junk, a POST and an oversized head, then a GET still answers
    const auto garbage = http_exchange(port, std::string(100 * 1024, 'x'));
    REQUIRE(garbage);
    CHECK(garbage->status == 400);
    const auto post = http_exchange(port, "POST /health HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    REQUIRE(post);
    CHECK(post->status == 405);
    const auto huge_header = http_exchange(
        port, "GET /health HTTP/1.0\r\nX-Junk: " + std::string(20 * 1024, 'y') + "\r\n\r\n");
    REQUIRE(huge_header);
    CHECK(huge_header->status == 431);
    const auto after = poll_health(
        port, [](const HttpReply& reply) { return reply.status == 200; }, std::chrono::seconds(10));
    REQUIRE(after);
    CHECK(after->status == 200);
  }

  // Stop only the loop's thread (tid == pid); the health server's thread keeps running.
  REQUIRE(::ptrace(PTRACE_SEIZE, agent.pid(), nullptr, nullptr) == 0);
  REQUIRE(::ptrace(PTRACE_INTERRUPT, agent.pid(), nullptr, nullptr) == 0);
  int stop_status = 0;
  REQUIRE(::waitpid(agent.pid(), &stop_status, __WALL) == agent.pid());
  REQUIRE(WIFSTOPPED(stop_status));
  const auto stalled_at = Clock::now();
  const auto stalled = poll_health(
      port, [](const HttpReply& reply) { return reply.status == 503; }, std::chrono::seconds(15));
  const auto stalled_for = Clock::now() - stalled_at;
  REQUIRE(stalled);
  INFO(stalled->text);
  CHECK(stalled->status == 503);
  CHECK(stalled->body["alive"] == false);
  CHECK(stalled->body["workers"] == running->body["workers"]);
  // Not at once: the loop's last progress before the stop is at most a tick (2/3 s) and some
  // scheduling delay old, so the 2 s timeout leaves well over 0.8 s to wait.
  CHECK(stalled_for >= std::chrono::milliseconds(800));
  INFO("503 body: " << stalled->text);
  REQUIRE(::ptrace(PTRACE_DETACH, agent.pid(), nullptr, nullptr) == 0);

  const auto resumed = poll_health(
      port, [](const HttpReply& reply) { return reply.status == 200; }, std::chrono::seconds(15));
  REQUIRE(resumed);
  CHECK(resumed->body["alive"] == true);

  write_file(go, "");
  const auto status = agent.wait_exit(std::chrono::seconds(30));
  INFO(agent.output());
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK_FALSE(get_health(port));  // the server went with the agent
}

TEST_CASE("TORCHELASTIC_HEALTH_CHECK_PORT that is not a port is a usage error: exit 2") {
  TempDir dir;
  for (const char* bad : {"abc", "0", "65536", ""}) {
    INFO(bad);
    Process agent({ddprun_binary(), "--standalone", "--no_python", "/bin/true"}, dir / "out",
                  {{"TORCHELASTIC_HEALTH_CHECK_PORT", bad}});
    const auto status = agent.wait_exit(std::chrono::seconds(30));
    REQUIRE(status);
    CHECK(*status == 2);
    CHECK_THAT(agent.output(), Catch::Contains("TORCHELASTIC_HEALTH_CHECK_PORT"));
  }
  Process bad_timeout(
      {ddprun_binary(), "--standalone", "--no_python", "/bin/true"}, dir / "out2",
      {{"TORCHELASTIC_HEALTH_CHECK_PORT", "29999"}, {"DDPRUN_HEALTH_CHECK_TIMEOUT", "0"}});
  const auto status = bad_timeout.wait_exit(std::chrono::seconds(30));
  REQUIRE(status);
  CHECK(*status == 2);
  CHECK_THAT(bad_timeout.output(), Catch::Contains("DDPRUN_HEALTH_CHECK_TIMEOUT"));
}
