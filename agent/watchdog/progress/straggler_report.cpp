#include "agent/watchdog/progress/straggler_report.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ddprun::agent {
namespace {

using nlohmann::json;

// Three decimals, without locale or libm.
std::string seconds_text(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", seconds);
  return text;
}

}  // namespace

std::string node_step_times_to_json(const NodeStepTimes& node) {
  json ranks = json::object();
  for (const auto& [rank, seconds] : node.median_step_s)
    ranks[std::to_string(rank)] = seconds;
  return json{{"host", node.host}, {"median_step_s", ranks}}.dump();
}

NodeStepTimes node_step_times_from_json(const std::string& text) {
  if (text.size() > kMaxStepRecordBytes)
    throw std::invalid_argument("the record is longer than " + std::to_string(kMaxStepRecordBytes) +
                                " bytes");
  const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object())
    throw std::invalid_argument("the record is not a JSON object");
  NodeStepTimes node;
  const auto host = object.find("host");
  if (host == object.end() || !host->is_string() ||
      host->get_ref<const std::string&>().size() > kMaxStepRecordHost)
    throw std::invalid_argument("'host' is not a string of at most " +
                                std::to_string(kMaxStepRecordHost) + " bytes");
  node.host = host->get<std::string>();
  const auto ranks = object.find("median_step_s");
  if (ranks == object.end() || !ranks->is_object() || ranks->size() > kMaxStepRecordRanks)
    throw std::invalid_argument("'median_step_s' is not an object of at most " +
                                std::to_string(kMaxStepRecordRanks) + " ranks");
  for (const auto& [key, value] : ranks->items()) {
    int rank = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), rank);
    if (error != std::errc() || end != key.data() + key.size() || rank < 0)
      throw std::invalid_argument("'median_step_s' has a key that is not a rank: '" +
                                  key.substr(0, 32) + "'");
    if (!value.is_number() || !(value.get<double>() > 0) || !(value.get<double>() < 1e7))
      throw std::invalid_argument("'median_step_s' of rank " + key +
                                  " is not a number of seconds in (0, 1e7)");
    node.median_step_s[rank] = value.get<double>();
  }
  return node;
}

std::vector<Straggler> find_stragglers(const std::vector<NodeStepTimes>& nodes, double factor) {
  std::vector<double> all;
  for (const NodeStepTimes& node : nodes)
    for (const auto& [rank, seconds] : node.median_step_s)
      all.push_back(seconds);
  if (all.size() < 2 || !(factor > 0))
    return {};
  std::sort(all.begin(), all.end());
  const double median = all[(all.size() - 1) / 2];
  std::vector<Straggler> out;
  for (const NodeStepTimes& node : nodes)
    for (const auto& [rank, seconds] : node.median_step_s)
      if (seconds >= factor * median)
        out.push_back(Straggler{rank, node.host, seconds, median});
  std::sort(out.begin(), out.end(),
            [](const Straggler& a, const Straggler& b) { return a.rank < b.rank; });
  return out;
}

std::string describe_straggler(const Straggler& straggler, std::chrono::milliseconds window) {
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.1f", straggler.step_s / straggler.job_median_s);
  return "straggler: rank " + std::to_string(straggler.rank) + " on " + straggler.host +
         " steps every " + seconds_text(straggler.step_s) + " s, " + ratio + "x the job's median " +
         seconds_text(straggler.job_median_s) + " s (last " +
         seconds_text(std::chrono::duration<double>(window).count()) + " s)";
}

}  // namespace ddprun::agent
