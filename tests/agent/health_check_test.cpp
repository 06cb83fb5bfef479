// TORCHELASTIC_HEALTH_CHECK_PORT: the real ddprun serves its health over HTTP; a real client
// asks. The agent's loop is stalled for real (ptrace stops only its main thread, the loop's),
// so the server, on its own thread, must report 503 on its own, then 200 once the loop runs.

#include <sys/ptrace.h>

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "agent/health/health_http.hpp"
#include "agent/health/prometheus_text.hpp"
#include "agent/health/round_timings.hpp"
#include "tests/agent/e2e_support.hpp"
#include "tests/agent/http_client.hpp"

using namespace ddprun::agent::e2e;
using ddprun::agent::classify_request;
using ddprun::agent::end_of_head;
using ddprun::agent::HealthRequest;
using ddprun::agent::HealthRoute;
using ddprun::agent::HealthState;
using ddprun::agent::prometheus_text;
using ddprun::agent::request_path;
using ddprun::agent::RoundTimings;
using ddprun::agent::route_of;

namespace {

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

// Checks `text` against Prometheus' text format: every sample's family has HELP and TYPE lines
// before it, names and label sets are well-formed, values are numbers. Returns the samples, by
// "name{labels}".
std::map<std::string, double> parse_exposition(const std::string& text) {
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? )"
      R"((-?[0-9.]+(e[+-]?[0-9]+)?|NaN|[+-]Inf))");
  static const std::regex comment(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  std::set<std::string> typed;
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    INFO(line);
    std::smatch match;
    if (std::regex_match(line, match, comment)) {
      if (match[1] == "TYPE")
        typed.insert(match[2]);
      continue;
    }
    REQUIRE(std::regex_match(line, match, sample));
    std::string family = match[1];
    for (const char* suffix : {"_sum", "_count"}) {
      if (!typed.contains(family) && family.ends_with(suffix))
        family.resize(family.size() - std::string(suffix).size());
    }
    CHECK(typed.contains(family));
    const auto space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  CHECK_FALSE(text.empty());
  CHECK(text.back() == '\n');
  return samples;
}

TEST_CASE("health requests: where a head ends and what it asks for; junk is never an error") {
  CHECK(end_of_head("GET / HTTP/1.0\r\n") == std::string::npos);
  CHECK(end_of_head("GET / HTTP/1.0\r\n\r\n") == 18);
  CHECK(end_of_head("GET / HTTP/1.0\n\nextra") == 16);
  CHECK(classify_request("GET /health HTTP/1.1\r\nHost: x\r\n\r\n") == HealthRequest::kGet);
  CHECK(classify_request("GET / HTTP/1.0\n\n") == HealthRequest::kGet);
  CHECK(classify_request("POST /health HTTP/1.1\r\n\r\n") == HealthRequest::kPost);
  CHECK(classify_request("PUT /health HTTP/1.1\r\n\r\n") == HealthRequest::kOtherVerb);
  CHECK(classify_request("HEAD / HTTP/1.1\r\n\r\n") == HealthRequest::kOtherVerb);
  for (const char* junk : {"", "\r\n\r\n", "GET\r\n\r\n", "GET /\r\n\r\n", " GET / HTTP/1.0\r\n",
                           "get / HTTP/1.0\r\n", "GET / FTP/1.0\r\n", "\x16\x03\x01\x02\x00"}) {
    INFO(junk);
    CHECK(classify_request(junk) == HealthRequest::kMalformed);
  }
  CHECK(request_path("GET /health HTTP/1.1\r\n\r\n") == "/health");
  CHECK(request_path("GET /metrics?x=1 HTTP/1.1\r\n\r\n") == "/metrics");
  CHECK(request_path("GET /#top HTTP/1.0\n\n") == "/");
  for (const char* path : {"/", "/health", "/healthz"})
    CHECK(route_of(path) == HealthRoute::kHealth);
  CHECK(route_of("/metrics") == HealthRoute::kMetrics);
  CHECK(route_of("/job/") == HealthRoute::kJobPage);
  CHECK(route_of("/job") == HealthRoute::kJobPageRedirect);
  CHECK(route_of("/job/api/state") == HealthRoute::kJobState);
  CHECK(route_of("/job/api/stacks") == HealthRoute::kJobStacks);
  for (const char* path : {"", "/nope", "/health/", "/metrics/", "/HEALTH", "health", "/job/x",
                           "/job/api/", "/job/api/state/"})
    CHECK(route_of(path) == HealthRoute::kNotFound);
}

TEST_CASE("/metrics: Prometheus' text format, one series per worker state") {
  HealthState state;
  state.round = 3;
  state.restarts = 1;
  state.max_restarts = 5;
  state.rounds_started = 2;
  state.rendezvous = {2, 1.5, 0.5};
  state.restart = {1, 2.25, 2.25};
  state.workers[0] = {"running", 4, 100, 0.125, 7, {}};
  state.workers[1] = {"failed", 5, 101, std::nullopt, 0, {}};
  state.stragglers = {5};
  const auto samples = parse_exposition(prometheus_text(state, true, 1765000000));
  CHECK(samples.at("ddprun_up") == 1);
  CHECK(samples.at("ddprun_last_progress_timestamp_seconds") == 1765000000);
  CHECK(samples.at("ddprun_round") == 3);
  CHECK(samples.at("ddprun_rounds_total") == 2);
  CHECK(samples.at("ddprun_restarts_total") == 1);
  CHECK(samples.at("ddprun_max_restarts") == 5);
  CHECK(samples.at("ddprun_rendezvous_duration_seconds_sum") == 1.5);
  CHECK(samples.at("ddprun_rendezvous_duration_seconds_count") == 2);
  CHECK(samples.at("ddprun_restart_duration_seconds_sum") == 2.25);
  CHECK(samples.at("ddprun_restart_duration_seconds_count") == 1);
  CHECK(samples.at(R"(ddprun_worker_state{local_rank="0",rank="4",state="running"})") == 1);
  CHECK(samples.at(R"(ddprun_worker_state{local_rank="0",rank="4",state="failed"})") == 0);
  CHECK(samples.at(R"(ddprun_worker_state{local_rank="1",rank="5",state="failed"})") == 1);
  int states_of_rank_0 = 0;
  for (const auto& [series, value] : samples)
    states_of_rank_0 += series.starts_with(R"(ddprun_worker_state{local_rank="0")") ? 1 : 0;
  CHECK(states_of_rank_0 == 6);
  CHECK(samples.at(R"(ddprun_step_interval_seconds{local_rank="0",rank="4"})") == 0.125);
  CHECK_FALSE(samples.contains(R"(ddprun_step_interval_seconds{local_rank="1",rank="5"})"));
  CHECK(samples.at("ddprun_stragglers") == 1);
  CHECK(samples.at(R"(ddprun_straggler{rank="5"})") == 1);

  CHECK_FALSE(samples.contains("ddprun_last_snapshot_age_seconds"));
  const auto before_any_round = parse_exposition(prometheus_text(HealthState{}, false, 0));
  CHECK(before_any_round.at("ddprun_up") == 0);
  CHECK_FALSE(before_any_round.contains("ddprun_round"));
  const auto with_snapshot = parse_exposition(prometheus_text(state, true, 0, 12.5));
  CHECK(with_snapshot.at("ddprun_last_snapshot_age_seconds") == 12.5);
  CHECK(ddprun::agent::prometheus_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

TEST_CASE("round timings: the rendezvous from workers gone, the restart from the interruption") {
  using namespace std::chrono_literals;
  const RoundTimings::Clock::time_point t0{};
  RoundTimings timings(t0);
  timings.workers_started(t0 + 2s);  // the first rendezvous: from the agent's start
  CHECK(timings.rendezvous().count == 1);
  CHECK(timings.rendezvous().last_s == 2.0);
  CHECK(timings.restart().count == 0);
  timings.interrupted(t0 + 10s);  // a worker failed
  timings.interrupted(t0 + 11s);  // and the round's stop: the first counts
  timings.workers_gone(t0 + 12s);
  timings.workers_gone(t0 + 13s);  // reported twice (failures, then the round's stop)
  timings.workers_started(t0 + 15s);
  CHECK(timings.rendezvous().count == 2);
  CHECK(timings.rendezvous().last_s == 3.0);
  CHECK(timings.rendezvous().sum_s == 5.0);
  CHECK(timings.restart().count == 1);
  CHECK(timings.restart().last_s == 5.0);
  timings.workers_gone(t0 + 20s);  // no interruption noted: a rendezvous only
  timings.workers_started(t0 + 21s);
  CHECK(timings.rendezvous().count == 3);
  CHECK(timings.restart().count == 1);
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

TEST_CASE(
    "the health port's /metrics: a real agent's restarts, rounds and workers, step intervals "
    "from their heartbeats; unknown paths get 404") {
  TempDir dir;
  const uint16_t port = free_port("0.0.0.0");
  const std::string go = dir / "go";
  // The first attempt fails; the second beats every 20 ms until told to go.
  const std::string worker =
      "[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && exit 1; "
      "while [ ! -e '" +
      go + "' ]; do printf . >&3; sleep 0.02; done";
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "2", "--max_restarts", "3",
                 "--watchdog-timeout", "60", "--no_python", "/bin/sh", "-c", worker},
                dir / "agent.out", {{"TORCHELASTIC_HEALTH_CHECK_PORT", std::to_string(port)}});
  const auto metrics = [&] {
    return http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  };
  // Polled: nothing inside the agent says when both ranks have beaten often enough.
  std::optional<HttpReply> reply;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  const std::string interval0 = R"(ddprun_step_interval_seconds{local_rank="0",rank="0"})";
  const std::string interval1 = R"(ddprun_step_interval_seconds{local_rank="1",rank="1"})";
  while (Clock::now() < deadline) {
    reply = metrics();
    if (reply && reply->text.find(interval0) != std::string::npos &&
        reply->text.find(interval1) != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(reply);
  INFO(reply->text);
  CHECK(reply->status == 200);
  const auto samples = parse_exposition(reply->text);
  CHECK(samples.at("ddprun_up") == 1);
  CHECK(samples.at("ddprun_restarts_total") == 1);
  CHECK(samples.at("ddprun_max_restarts") == 3);
  CHECK(samples.at("ddprun_rounds_total") == 2);
  CHECK(samples.at("ddprun_rendezvous_duration_seconds_count") == 2);
  CHECK(samples.at("ddprun_restart_duration_seconds_count") == 1);
  CHECK(samples.at("ddprun_restart_duration_seconds_sum") > 0);
  for (const char* rank : {"0", "1"}) {
    const std::string labels = std::string("local_rank=\"") + rank + "\",rank=\"" + rank + "\"";
    CHECK(samples.at("ddprun_worker_state{" + labels + ",state=\"running\"}") == 1);
    CHECK(samples.at("ddprun_worker_state{" + labels + ",state=\"failed\"}") == 0);
    const double interval = samples.at("ddprun_step_interval_seconds{" + labels + "}");
    CHECK(interval >= 0.02);
    CHECK(interval < 5.0);
  }
  // Without a job secret the job page is open, its stacks button off.
  const auto page = http_exchange(port, "GET /job/ HTTP/1.0\r\n\r\n");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK_THAT(page->head, Catch::Contains("Content-Type: text/html"));
  CHECK_THAT(page->head, Catch::Contains("Content-Security-Policy: default-src 'none'"));
  const auto press = http_exchange(port, "POST /job/api/stacks HTTP/1.0\r\n\r\n");
  REQUIRE(press);
  CHECK(press->body["enabled"] == false);
  CHECK(press->body["phase"] == "none");
  for (const char* path : {"/nope", "/metrics/x", "/job/nope"}) {
    INFO(path);
    const auto missing = http_exchange(port, std::string("GET ") + path + " HTTP/1.0\r\n\r\n");
    REQUIRE(missing);
    CHECK(missing->status == 404);
  }
  const auto root = http_exchange(port, "GET / HTTP/1.0\r\n\r\n");
  REQUIRE(root);
  CHECK(root->status == 200);
  CHECK(root->body["restarts"] == 1);

  write_file(go, "");
  const auto status = agent.wait_exit(std::chrono::seconds(30));
  INFO(agent.output());
  REQUIRE(status);
  CHECK(*status == 0);
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
