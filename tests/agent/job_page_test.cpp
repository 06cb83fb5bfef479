// The job page's pure parts: who may look (the token derived from the job secret), the node
// records the nodes exchange through the store (untrusted: validated and bounded when read), and
// the JSON API the page reads.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/health/job_api.hpp"
#include "agent/health/job_page_access.hpp"
#include "agent/health/node_record.hpp"
#include "agent/health/trainer_progress.hpp"

using namespace ddprun::agent;

namespace {

NodeRecord sample_record() {
  NodeRecord record;
  record.host = "node-b";
  record.group_rank = 1;
  record.alive = true;
  record.last_progress_unix = 1765000000;
  record.restarts = 2;
  record.node_check = "failed: no GPU";
  record.ranks = {{2, 0, 4242, "running", 0.125, 17, false, {0.25, std::nullopt, 0.125}},
                  {3, 1, 4243, "failed", std::nullopt, 0, true, {}}};
  return record;
}

}  // namespace

TEST_CASE("the job page's token: derived from the job secret, presented in the query or a header",
          "[job_page][unit]") {
  CHECK(job_page_token("").empty());
  const std::string token = job_page_token("s3cret");
  CHECK(token.size() == 32);
  CHECK(token.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(token == job_page_token("s3cret"));
  CHECK(token != job_page_token("s3cret2"));
  CHECK(token.find("s3cret") == std::string::npos);

  CHECK(presented_token("GET /job/?token=abc HTTP/1.1\r\n\r\n") == "abc");
  CHECK(presented_token("GET /job/api/state?x=1&token=abc#top HTTP/1.1\r\n\r\n") == "abc");
  CHECK(presented_token("GET /job/ HTTP/1.1\r\nauthorization: Bearer xyz\r\n\r\n") == "xyz");
  CHECK(presented_token("GET /job/ HTTP/1.1\r\nHost: a\r\n\r\n").empty());
  CHECK(presented_token("GET /job/?tokens=abc HTTP/1.1\r\n\r\n").empty());

  CHECK(may_view_job_page("GET /job/ HTTP/1.1\r\n\r\n", ""));  // no secret: open
  CHECK(may_view_job_page("GET /job/?token=" + token + " HTTP/1.1\r\n\r\n", token));
  CHECK(may_view_job_page("GET /job/ HTTP/1.1\r\nAuthorization: Bearer " + token + "\r\n\r\n",
                          token));
  CHECK_FALSE(may_view_job_page("GET /job/ HTTP/1.1\r\n\r\n", token));
  CHECK_FALSE(may_view_job_page("GET /job/?token= HTTP/1.1\r\n\r\n", token));
  CHECK_FALSE(may_view_job_page("GET /job/?token=" + token.substr(1) + " HTTP/1.1\r\n\r\n", token));
  CHECK_FALSE(may_view_job_page("GET /job/?token=" + token + "0 HTTP/1.1\r\n\r\n", token));
}

TEST_CASE("a node record survives the round trip; a corrupt one is named, never shown",
          "[job_page][unit]") {
  const NodeRecord record = sample_record();
  const NodeRecord back = node_record_from_json(node_record_to_json(record));
  CHECK(back.host == "node-b");
  CHECK(back.group_rank == 1);
  CHECK(back.restarts == 2);
  CHECK(back.node_check == "failed: no GPU");
  REQUIRE(back.ranks.size() == 2);
  CHECK(back.ranks[0].rank == 2);
  CHECK(back.ranks[0].pid == 4242);
  CHECK(back.ranks[0].step_interval_s == 0.125);
  CHECK(back.ranks[0].steps == 17);
  CHECK(back.ranks[0].step_series == std::vector<std::optional<double>>{0.25, std::nullopt, 0.125});
  CHECK(back.ranks[1].step_series.empty());
  CHECK(back.ranks[1].state == "failed");
  CHECK_FALSE(back.ranks[1].step_interval_s);
  CHECK(back.ranks[1].straggler);

  const auto refused = [](const std::string& text, const std::string& why) {
    INFO(text);
    try {
      node_record_from_json(text);
      FAIL("accepted");
    } catch (const std::invalid_argument& error) {
      CHECK_THAT(error.what(), Catch::Contains(why));
    }
  };
  nlohmann::json good = nlohmann::json::parse(node_record_to_json(record));
  refused("", "not a JSON object");
  refused("[1,2]", "not a JSON object");
  refused(std::string(kMaxNodeRecordBytes + 1, ' '), "longer than");
  for (const char* name :
       {"host", "group_rank", "alive", "last_progress_unix", "node_check", "ranks"}) {
    auto missing = good;
    missing.erase(name);
    refused(missing.dump(), std::string("'") + name + "' is missing");
  }
  auto long_host = good;
  long_host["host"] = std::string(kMaxNodeRecordText + 1, 'h');
  refused(long_host.dump(), "'host' is longer than");
  auto negative = good;
  negative["group_rank"] = -1;
  refused(negative.dump(), "'group_rank' is -1");
  auto many = good;
  many["ranks"] = nlohmann::json::array();
  for (std::size_t i = 0; i <= kMaxNodeRecordRanks; ++i)
    many["ranks"].push_back(good["ranks"][0]);
  refused(many.dump(), "'ranks' is not an array of at most");
  auto bad_interval = good;
  bad_interval["ranks"][0]["step_interval_s"] = "fast";
  refused(bad_interval.dump(), "'step_interval_s'");
  auto long_series = good;
  long_series["ranks"][0]["step_series"] = std::vector<double>(kMaxStepSeriesPoints + 1, 0.1);
  refused(long_series.dump(), "'step_series' is not an array of at most");
  auto bad_point = good;
  bad_point["ranks"][0]["step_series"] = {0.1, -1.0};
  refused(bad_point.dump(), "'step_series' is not a number of seconds");
  auto bad_state = good;
  bad_state["ranks"][1]["state"] = 7;
  refused(bad_state.dump(), "'state' is not a string");
}

TEST_CASE("the job API: the job, every node (or why not), the events; names stay data",
          "[job_page][unit]") {
  HealthState state;
  state.job = {"run-7", "c10d", "<b>node-a</b>", 2, 3, 2};
  state.round = 4;
  state.group_rank = 0;
  state.group_world_size = 2;
  state.world_size = 4;
  state.restarts = 1;
  state.max_restarts = 3;
  state.workers[0] = {"running", 0, 100, 0.5, 9, {0.5, 0.5}};
  std::vector<NodeView> nodes{{0, node_record_of(state, true, 1765000000), ""},
                              {1, sample_record(), ""},
                              {2, std::nullopt, "unreadable record: 'host' is missing"}};
  const auto body = nlohmann::json::parse(job_state_json(
      state, nodes, {R"({"event":"round_formed","node":"a","time":1.5})", "not json"}));
  CHECK(body["job"]["run_id"] == "run-7");
  CHECK(body["job"]["round"] == 4);
  CHECK(body["job"]["world_size"] == 4);
  CHECK(body["job"]["nodes"] == nlohmann::json{{"min", 2}, {"max", 3}, {"now", 2}});
  CHECK(body["job"]["restarts"] == 1);
  CHECK(body["job"]["max_restarts"] == 3);
  REQUIRE(body["nodes"].size() == 3);
  CHECK(body["nodes"][0]["host"] == "<b>node-a</b>");  // as data; the page shows it as text
  CHECK(body["nodes"][0]["ranks"][0]["steps"] == 9);
  CHECK(body["nodes"][0]["ranks"][0]["step_series"] == nlohmann::json{0.5, 0.5});
  CHECK(body["nodes"][1]["ranks"][0]["step_series"] == nlohmann::json{0.25, nullptr, 0.125});
  CHECK(body["nodes"][1]["ranks"].size() == 2);
  CHECK(body["nodes"][2]["problem"] == "unreadable record: 'host' is missing");
  CHECK_FALSE(body["nodes"][2].contains("ranks"));
  REQUIRE(body["events"].size() == 1);  // a line that is not JSON is left out
  CHECK(body["events"][0]["event"] == "round_formed");

  HealthState bytes = state;
  bytes.job.host = std::string("bad\xff\xfe", 5);
  std::vector<NodeView> mine{{0, node_record_of(bytes, true, 0), ""}};
  CHECK_NOTHROW(nlohmann::json::parse(job_state_json(bytes, mine, {})));
}

TEST_CASE("the trainer's progress from its metrics lines: curves thinned, the last snapshot",
          "[job_page][unit]") {
  std::string tail = "cut line from before the tail\n";
  for (int step = 1; step <= 450; ++step)
    tail += nlohmann::json{{"kind", "step"},
                           {"global_iter", step},
                           {"train_loss", 3.0 - step / 300.0},
                           {"tokens_per_second", 20000 + step}}
                .dump() +
            "\n";
  tail += R"({"kind":"epoch","global_iter":450,"train_loss":1.5,"eval_loss":1.25})"
          "\n";
  tail += R"({"kind":"snapshot","path":"snapshot.pt","unix_time":1765000000.5,)"
          R"("finished_epoch":1,"steps_into_epoch":0,"stall_seconds":0.002})"
          "\n";
  tail += R"({"kind":"step","global_iter":"junk"})"
          "\n{not json\n";
  const auto progress = ddprun::agent::trainer_progress(tail);
  const auto& steps = progress["steps"];
  REQUIRE(steps.size() <= ddprun::agent::kTrainerCurvePoints);
  CHECK(steps.size() >= ddprun::agent::kTrainerCurvePoints / 2);
  CHECK(steps.front() == 1);
  CHECK(progress["train_loss"].size() == steps.size());
  CHECK(progress["tokens_per_second"].front() == 20001);
  CHECK(progress["eval"] == nlohmann::json::parse("[[450, 1.25]]"));
  CHECK(progress["snapshot"]["path"] == "snapshot.pt");
  CHECK(progress["snapshot"]["finished_epoch"] == 1);
  CHECK(progress["snapshot"]["unix_time"] == 1765000000.5);
  CHECK(ddprun::agent::trainer_progress("")["snapshot"].is_null());
  CHECK(ddprun::agent::read_tail("/nonexistent/metrics.jsonl").empty());
}
