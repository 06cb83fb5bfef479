#include "agent/health/trainer_progress.hpp"

#include <cmath>
#include <fstream>
#include <vector>

namespace ddprun::agent {
namespace {

using nlohmann::json;

std::optional<double> number(const json& line, const char* name) {
  const auto it = line.find(name);
  if (it == line.end() || !it->is_number() || !std::isfinite(it->get<double>()))
    return std::nullopt;
  return it->get<double>();
}

struct Point {
  double step;
  double loss;
  double tokens_per_second;
};

json snapshot_of(const json& line) {
  const auto it = line.find("path");
  json snapshot = {{"path", it != line.end() && it->is_string() ? *it : json()}};
  for (const char* name : {"finished_epoch", "steps_into_epoch", "unix_time", "stall_seconds"}) {
    const auto value = number(line, name);
    snapshot[name] = value ? json(*value) : json();
  }
  return snapshot;
}

}  // namespace

json trainer_progress(std::string_view tail) {
  std::vector<Point> points;
  json evals = json::array();
  json snapshot;
  std::size_t at = 0;
  while (at < tail.size()) {
    const std::size_t end = std::min(tail.find('\n', at), tail.size());
    const json line = json::parse(tail.substr(at, end - at), nullptr, /*allow_exceptions=*/false);
    at = end + 1;
    if (!line.is_object() || !line.contains("kind") || !line["kind"].is_string())
      continue;
    const std::string& kind = line["kind"].get_ref<const std::string&>();
    const auto step = number(line, "global_iter");
    if (kind == "step" && step) {
      const auto loss = number(line, "train_loss");
      const auto rate = number(line, "tokens_per_second");
      if (loss && rate)
        points.push_back({*step, *loss, *rate});
    } else if (kind == "epoch" && step) {
      if (const auto eval = number(line, "eval_loss"))
        evals.push_back({*step, *eval});
    } else if (kind == "snapshot") {
      snapshot = snapshot_of(line);
    }
  }
  json steps = json::array();
  json losses = json::array();
  json rates = json::array();
  const std::size_t stride = points.size() / kTrainerCurvePoints + 1;
  for (std::size_t i = 0; i < points.size(); i += stride) {
    steps.push_back(points[i].step);
    losses.push_back(points[i].loss);
    rates.push_back(points[i].tokens_per_second);
  }
  return {{"steps", steps},
          {"train_loss", losses},
          {"tokens_per_second", rates},
          {"eval", evals},
          {"snapshot", snapshot}};
}

std::string read_tail(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return {};
  const std::streamoff size = file.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(kTrainerTailBytes)
                                   ? size - static_cast<std::streamoff>(kTrainerTailBytes)
                                   : 0;
  file.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(file.gcount()));
  return text;
}

}  // namespace ddprun::agent
