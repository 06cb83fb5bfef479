#include "agent/node_check/node_check_plan.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "common/text.hpp"

namespace ddprun::agent {

namespace {

constexpr std::string_view kSnapshotOverride = "trainer_config.snapshot_path=";

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos)
      return parts;
    text.remove_prefix(at + 1);
  }
}

std::optional<int> parse_index(std::string_view text) {
  text = common::trim(text);
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

// A device list that names no device: CUDA's "" and "-1", the container toolkit's "void" and
// "none".
bool names_no_device(std::string_view list) {
  list = common::trim(list);
  return list.empty() || list == "-1" || list == "void" || list == "none" || list == "NoDevFiles";
}

std::optional<GpuCheck> plan_gpu_check(const GpuFacts& facts) {
  GpuCheck check;
  if (facts.cuda_visible_devices) {
    if (names_no_device(*facts.cuda_visible_devices))
      return std::nullopt;  // the workers see no GPU: none is required
    // By index: each must be listed; by UUID or MIG name: at least one GPU must answer.
    for (std::string_view entry : split(*facts.cuda_visible_devices, ','))
      if (auto index = parse_index(entry))
        check.indexes.push_back(*index);
    check.min_count = check.indexes.empty() ? 1 : 0;
  } else if (facts.device_nodes > 0 || facts.nvidiactl) {
    check.min_count = std::max(1, facts.device_nodes);
  } else if (!facts.nvidia_visible_devices || names_no_device(*facts.nvidia_visible_devices)) {
    return std::nullopt;  // a CPU node
  }
  if (!facts.nvidia_smi)
    return std::nullopt;  // nothing to ask
  check.argv = {*facts.nvidia_smi, "--query-gpu=index,name", "--format=csv,noheader"};
  return check;
}

}  // namespace

std::optional<std::string> trainer_snapshot_folder(const WorkerSpec& workers) {
  if (workers.entry_kind != EntryKind::kBundledTrainer)
    return std::nullopt;
  std::string folder = ".";
  for (const std::string& arg : workers.argv) {
    if (!arg.starts_with(kSnapshotOverride))
      continue;  // the last override wins, as in the trainer
    const std::filesystem::path path(arg.substr(kSnapshotOverride.size()));
    folder = path.has_parent_path() ? path.parent_path().string() : ".";
  }
  return folder;
}

NodeCheckPlan plan_node_checks(const NodeCheckConfig& config, const WorkerSpec& workers,
                               const LogConfig& logs, const GpuFacts& facts) {
  NodeCheckPlan plan;
  if (logs.log_dir && *logs.log_dir != "/dev/null")
    plan.folders.push_back(*logs.log_dir);
  if (auto snapshots = trainer_snapshot_folder(workers);
      snapshots &&
      std::find(plan.folders.begin(), plan.folders.end(), *snapshots) == plan.folders.end())
    plan.folders.push_back(*snapshots);
  plan.gpus = plan_gpu_check(facts);
  plan.command = config.command.value_or("");
  return plan;
}

std::optional<std::string> gpu_query_problem(std::string_view output, const GpuCheck& check) {
  std::set<int> listed;
  for (std::string_view line : split(output, '\n')) {
    line = common::trim(line);
    if (line.empty())
      continue;
    const auto comma = line.find(',');
    const auto index =
        comma == std::string_view::npos ? std::nullopt : parse_index(line.substr(0, comma));
    if (!index)
      return "nvidia-smi: " + last_output_lines(line, 1);  // e.g. "Unable to determine ..."
    listed.insert(*index);
  }
  for (int index : check.indexes) {
    if (!listed.contains(index))
      return "GPU " + std::to_string(index) +
             " (CUDA_VISIBLE_DEVICES) does not answer: " + std::to_string(listed.size()) +
             " GPU(s) listed by nvidia-smi";
  }
  if (static_cast<int>(listed.size()) < check.min_count)
    return std::to_string(check.min_count) + " GPU(s) expected, " + std::to_string(listed.size()) +
           " answered nvidia-smi";
  return std::nullopt;
}

std::string last_output_lines(std::string_view output, std::size_t max_lines) {
  constexpr std::size_t kMaxLineChars = 200;
  std::vector<std::string> kept;
  for (std::string_view line : split(output, '\n')) {
    line = common::trim(line);
    if (line.empty())
      continue;
    kept.emplace_back(line.substr(0, kMaxLineChars));
  }
  const std::size_t first = kept.size() > max_lines ? kept.size() - max_lines : 0;
  std::string text;
  for (std::size_t i = first; i < kept.size(); ++i)
    text += (text.empty() ? "" : " | ") + kept[i];
  return text;
}

}  // namespace ddprun::agent
