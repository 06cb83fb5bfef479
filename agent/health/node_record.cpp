#include "agent/health/node_record.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "agent/base/json_fields.hpp"

namespace ddprun::agent {
namespace {

using nlohmann::json;

constexpr int64_t kMaxUnixTime = int64_t{1} << 40;
constexpr int kMaxRank = 1 << 24;
constexpr double kMaxInterval = 1e7;

std::string text_field(const json& object, const char* name) {
  return json_text(object, name, kMaxNodeRecordText);
}

int64_t int_field(const json& object, const char* name, int64_t low, int64_t high) {
  return json_integer(json_field(object, name), name, low, high);
}

std::optional<double> seconds_value(const json& value, const char* name) {
  if (value.is_null())
    return std::nullopt;
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0 ||
      value.get<double>() > kMaxInterval)
    throw std::invalid_argument(std::string("'") + name + "' is not a number of seconds");
  return value.get<double>();
}

RankView rank_from_json(const json& object) {
  if (!object.is_object())
    throw std::invalid_argument("a rank is not a JSON object");
  RankView rank;
  rank.rank = static_cast<int>(int_field(object, "rank", 0, kMaxRank));
  rank.local_rank = static_cast<int>(int_field(object, "local_rank", 0, kMaxRank));
  rank.pid = static_cast<int>(int_field(object, "pid", 0, kMaxRank * int64_t{128}));
  rank.state = text_field(object, "state");
  rank.straggler = json_flag(object, "straggler");
  rank.steps = static_cast<uint64_t>(int_field(object, "steps", 0, int64_t{1} << 50));
  rank.step_interval_s = seconds_value(json_field(object, "step_interval_s"), "step_interval_s");
  if (const auto it = object.find("step_series"); it != object.end()) {
    if (!it->is_array() || it->size() > kMaxStepSeriesPoints)
      throw std::invalid_argument("'step_series' is not an array of at most " +
                                  std::to_string(kMaxStepSeriesPoints) + " points");
    for (const auto& point : *it)
      rank.step_series.push_back(seconds_value(point, "step_series"));
  }
  return rank;
}

json series_json(const std::vector<std::optional<double>>& series) {
  json points = json::array();
  for (const auto& point : series)
    points.push_back(point ? json(*point) : json());
  return points;
}

}  // namespace

NodeRecord node_record_of(const HealthState& state, bool alive, int64_t last_progress_unix) {
  NodeRecord record;
  record.host = state.job.host.substr(0, kMaxNodeRecordText);
  record.group_rank = state.group_rank;
  record.alive = alive;
  record.last_progress_unix = last_progress_unix;
  record.restarts = state.restarts;
  record.node_check = state.node_check.substr(0, kMaxNodeRecordText);
  for (const auto& [local_rank, worker] : state.workers) {
    record.ranks.push_back({worker.global_rank, local_rank, worker.pid, worker.state,
                            worker.step_interval_s, worker.steps,
                            state.stragglers.contains(worker.global_rank), worker.step_series});
  }
  return record;
}

json node_record_json(const NodeRecord& record) {
  json ranks = json::array();
  for (const auto& rank : record.ranks) {
    ranks.push_back(
        {{"rank", rank.rank},
         {"local_rank", rank.local_rank},
         {"pid", rank.pid},
         {"state", rank.state},
         {"step_interval_s", rank.step_interval_s ? json(*rank.step_interval_s) : json()},
         {"steps", rank.steps},
         {"straggler", rank.straggler},
         {"step_series", series_json(rank.step_series)}});
  }
  return {{"host", record.host},
          {"group_rank", record.group_rank},
          {"alive", record.alive},
          {"last_progress_unix", record.last_progress_unix},
          {"restarts", record.restarts},
          {"node_check", record.node_check},
          {"ranks", ranks}};
}

std::string node_record_to_json(const NodeRecord& record) {
  return node_record_json(record).dump(-1, ' ', false, json::error_handler_t::replace);
}

NodeRecord node_record_from_json(const std::string& text) {
  if (text.size() > kMaxNodeRecordBytes)
    throw std::invalid_argument("the record is longer than " + std::to_string(kMaxNodeRecordBytes) +
                                " bytes");
  const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object())
    throw std::invalid_argument("the record is not a JSON object");
  NodeRecord record;
  record.host = text_field(object, "host");
  record.group_rank = static_cast<int>(int_field(object, "group_rank", 0, kMaxRank));
  record.alive = json_flag(object, "alive");
  record.last_progress_unix = int_field(object, "last_progress_unix", 0, kMaxUnixTime);
  record.restarts = static_cast<int>(int_field(object, "restarts", 0, kMaxRank));
  record.node_check = text_field(object, "node_check");
  const json& ranks = json_field(object, "ranks");
  if (!ranks.is_array() || ranks.size() > kMaxNodeRecordRanks)
    throw std::invalid_argument("'ranks' is not an array of at most " +
                                std::to_string(kMaxNodeRecordRanks) + " ranks");
  for (const auto& rank : ranks)
    record.ranks.push_back(rank_from_json(rank));
  return record;
}

}  // namespace ddprun::agent
