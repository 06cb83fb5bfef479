#include "rendezvous/round/records.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <tuple>

#include "rendezvous/round/record_checks.hpp"

namespace ddprun::rendezvous::round {
namespace {

constexpr std::size_t kMaxAddrBytes = 1024;
constexpr std::size_t kMaxNonceBytes = 128;
constexpr int kMaxNproc = 1 << 20;
constexpr int kMaxNodes = 1 << 20;
constexpr std::size_t kMaxFailureTextBytes = 64 * 1024;

[[noreturn]] void bad_record(const std::string& key, const std::string& why) {
  throw CorruptRecord(key, "a node record with " + why);
}

int int_field(const nlohmann::json& j, const char* name, int lo, int hi, const std::string& key) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) {
    bad_record(key, std::string("missing integer field '") + name + "'");
  }
  const auto value = it->get<int64_t>();
  if (value < lo || value > hi) {
    bad_record(key, std::string("field '") + name + "' out of range: " + std::to_string(value));
  }
  return static_cast<int>(value);
}

std::string string_field(const nlohmann::json& j, const char* name, std::size_t max_bytes,
                         const std::string& key) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) {
    bad_record(key, std::string("missing string field '") + name + "'");
  }
  auto value = it->get<std::string>();
  if (value.empty() || value.size() > max_bytes) {
    bad_record(key, std::string("field '") + name + "' has a bad length");
  }
  return value;
}

bool parse_int(std::string_view text, int64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size();
}

// A round's records must be there and agree on --nnodes before ranks can follow from them.
void check_participants(const std::vector<NodeRecord>& records) {
  if (records.empty()) {
    throw RendezvousError("a round without participants");
  }
  for (std::size_t i = 1; i < records.size(); ++i) {
    const auto& a = records.front();
    const auto& b = records[i];
    if (a.min_nodes != b.min_nodes || a.max_nodes != b.max_nodes) {
      throw RendezvousError(
          "agents disagree on --nnodes: " + a.addr + " (pid " + std::to_string(a.pid) +
          ") has --nnodes " + nnodes_text(a.min_nodes, a.max_nodes) + " but " + b.addr + " (pid " +
          std::to_string(b.pid) + ") has --nnodes " + nnodes_text(b.min_nodes, b.max_nodes));
    }
  }
}

std::vector<Assignment> assign_in_order(const std::vector<std::size_t>& order_of_rank,
                                        const std::vector<NodeRecord>& records, int restart_count) {
  const int n = static_cast<int>(records.size());
  std::vector<Assignment> by_slot(records.size());
  int64_t base = 0;
  for (int rank = 0; rank < n; ++rank) {
    base += records[order_of_rank[static_cast<std::size_t>(rank)]].nproc_per_node;
  }
  if (base > std::numeric_limits<int>::max()) {
    throw RendezvousError("the world size of the round overflows: " + std::to_string(base));
  }
  const int world = static_cast<int>(base);
  int next_base = 0;
  for (int rank = 0; rank < n; ++rank) {
    const std::size_t index = order_of_rank[static_cast<std::size_t>(rank)];
    Assignment& a = by_slot[index];
    a.group_rank = rank;
    a.group_world_size = n;
    a.base_global_rank = next_base;
    a.world_size = world;
    a.restart_count = restart_count;
    a.neighbor_slot =
        n == 1 ? 0 : static_cast<int>(order_of_rank[static_cast<std::size_t>((rank + 1) % n)]) + 1;
    a.rank0_slot = static_cast<int>(order_of_rank.front()) + 1;
    next_base += records[index].nproc_per_node;
  }
  return by_slot;
}

}  // namespace

std::string nnodes_text(int min_nodes, int max_nodes) {
  return min_nodes == max_nodes ? std::to_string(min_nodes)
                                : std::to_string(min_nodes) + ":" + std::to_string(max_nodes);
}

std::string encode_node_record(const NodeRecord& record) {
  nlohmann::json j = {{"addr", record.addr},     {"pid", record.pid},
                      {"nonce", record.nonce},   {"nproc", record.nproc_per_node},
                      {"min", record.min_nodes}, {"max", record.max_nodes}};
  if (record.rank_hint) {
    j["hint"] = *record.rank_hint;
  }
  return j.dump();
}

NodeRecord decode_node_record(std::string_view text, const std::string& key) {
  if (text.starts_with("error ")) {
    // A node that found the job misconfigured filled the slots so nobody waits for it.
    throw RendezvousError(published_error(text.substr(6), key));
  }
  if (text.size() > kMaxNodeRecordBytes) {
    throw CorruptRecord(key, "holds " + std::to_string(text.size()) + " bytes, more than the " +
                                 std::to_string(kMaxNodeRecordBytes) + " of a node record");
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw CorruptRecord(key, "holds " + shown_value(text) + ", not a node record (not JSON)");
  }
  if (!j.is_object()) {
    throw CorruptRecord(key, "holds JSON " + shown_value(text) + ", not a node record object");
  }
  NodeRecord r;
  r.addr = string_field(j, "addr", kMaxAddrBytes, key);
  r.nonce = string_field(j, "nonce", kMaxNonceBytes, key);
  auto pid = j.find("pid");
  if (pid == j.end() || !pid->is_number_integer() || pid->get<int64_t>() < 0) {
    bad_record(key, "missing or bad field 'pid'");
  }
  r.pid = pid->get<int64_t>();
  r.nproc_per_node = int_field(j, "nproc", 1, kMaxNproc, key);
  r.min_nodes = int_field(j, "min", 1, kMaxNodes, key);
  r.max_nodes = int_field(j, "max", 1, kMaxNodes, key);
  if (j.contains("hint")) {
    r.rank_hint = int_field(j, "hint", 0, kMaxNodes, key);
  }
  return r;
}

std::string encode_assignment(const Assignment& a) {
  std::ostringstream out;
  out << "ok " << a.group_rank << ' ' << a.group_world_size << ' ' << a.base_global_rank << ' '
      << a.world_size << ' ' << a.restart_count << ' ' << a.neighbor_slot << ' ' << a.rank0_slot;
  return out.str();
}

std::string encode_assignment_error(std::string_view message) {
  return "error " + std::string(message);
}

Assignment decode_assignment(std::string_view text, const std::string& key) {
  if (text.starts_with("error ")) {
    throw RendezvousError(published_error(text.substr(6), key));
  }
  const auto malformed = [&] {
    return CorruptRecord(key, "holds " + shown_value(text) + ", not a rank assignment");
  };
  std::vector<int64_t> fields;
  std::string_view rest = text;
  if (!rest.starts_with("ok ") || text.size() > kMaxNodeRecordBytes) {
    throw malformed();
  }
  rest.remove_prefix(3);
  while (!rest.empty() && fields.size() < 8) {
    const auto space = rest.find(' ');
    int64_t value = 0;
    if (!parse_int(rest.substr(0, space), value) || value < 0 ||
        value > std::numeric_limits<int>::max()) {
      throw malformed();
    }
    fields.push_back(value);
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  }
  if (fields.size() != 7 || !rest.empty()) {
    throw malformed();
  }
  Assignment a;
  a.group_rank = static_cast<int>(fields[0]);
  a.group_world_size = static_cast<int>(fields[1]);
  a.base_global_rank = static_cast<int>(fields[2]);
  a.world_size = static_cast<int>(fields[3]);
  a.restart_count = static_cast<int>(fields[4]);
  a.neighbor_slot = static_cast<int>(fields[5]);
  a.rank0_slot = static_cast<int>(fields[6]);
  // Every node runs at least one process, and the ring names another node unless alone.
  const bool alone = a.group_world_size == 1;
  if (a.group_world_size < 1 || a.group_world_size > kMaxCount ||
      a.group_rank >= a.group_world_size || a.world_size < a.group_world_size ||
      a.base_global_rank >= a.world_size || a.base_global_rank < a.group_rank ||
      (alone ? a.neighbor_slot != 0 : a.neighbor_slot < 1) ||
      a.neighbor_slot > a.group_world_size || a.rank0_slot < 1 ||
      a.rank0_slot > a.group_world_size || a.restart_count > kMaxRestarts) {
    throw CorruptRecord(
        key, "holds " + shown_value(text) + ", a rank assignment whose ranks do not fit together");
  }
  return a;
}

std::vector<Assignment> assign_dynamic_ranks(const std::vector<NodeRecord>& records,
                                             int restart_count) {
  check_participants(records);
  std::vector<std::size_t> order(records.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<int> hint_or_last(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    hint_or_last[i] = records[i].rank_hint.value_or(std::numeric_limits<int>::max());
  }
  auto key = [&](std::size_t i) {
    const auto& r = records[i];
    return std::tie(hint_or_last[i], r.addr, r.pid, r.nonce);
  };
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return assign_in_order(order, records, restart_count);
}

std::vector<Assignment> assign_static_ranks(const std::vector<NodeRecord>& records,
                                            int restart_count) {
  check_participants(records);
  std::vector<std::size_t> order(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].rank_hint != static_cast<int>(i)) {
      throw RendezvousError("node record for --node_rank " + std::to_string(i) + " from " +
                            records[i].addr + " claims another rank");
    }
    order[i] = i;
  }
  return assign_in_order(order, records, restart_count);
}

std::string encode_failure_line(const WorkerFailure& f) {
  auto clip = [](const std::string& s) {
    return s.size() > kMaxFailureTextBytes ? s.substr(0, kMaxFailureTextBytes) : s;
  };
  nlohmann::json j = {{"timestamp", f.timestamp.time_since_epoch().count()},
                      {"host", clip(f.host)},
                      {"rank", f.global_rank},
                      {"local_rank", f.local_rank},
                      {"exitcode", f.exit_code},
                      {"pid", f.pid},
                      {"error_file", clip(f.error_file)},
                      {"message", clip(f.message)}};
  if (f.while_stopped)
    j["while_stopped"] = true;
  // error_handler::replace keeps invalid UTF-8 from a worker's error file from throwing.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {
void sort_root_cause_first(std::vector<WorkerFailure>& failures) {
  std::stable_sort(failures.begin(), failures.end(),
                   [](const WorkerFailure& a, const WorkerFailure& b) {
                     // Failures of one moment (one monitor check): the lowest rank is the root
                     // cause. Those seen while being stopped for others' come after every other.
                     return std::tie(a.while_stopped, a.timestamp, a.global_rank) <
                            std::tie(b.while_stopped, b.timestamp, b.global_rank);
                   });
}
}  // namespace

std::vector<WorkerFailure> decode_failure_lines(std::string_view text, std::size_t max_failures) {
  std::vector<WorkerFailure> failures;
  while (!text.empty() && failures.size() < max_failures) {
    const auto newline = text.find('\n');
    const auto line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      continue;
    }
    WorkerFailure f;
    try {
      f.timestamp = unix_time(j.at("timestamp").get<double>());
      f.host = j.at("host").get<std::string>();
      f.global_rank = j.at("rank").get<int>();
      f.local_rank = j.at("local_rank").get<int>();
      f.exit_code = j.at("exitcode").get<int>();
      f.pid = j.at("pid").get<int>();
      f.error_file = j.at("error_file").get<std::string>();
      f.message = j.at("message").get<std::string>();
      f.while_stopped = j.value("while_stopped", false);
    } catch (const nlohmann::json::exception&) {
      continue;  // a line some other writer mangled: not worth failing the summary over
    }
    failures.push_back(std::move(f));
  }
  sort_root_cause_first(failures);
  return failures;
}

std::vector<WorkerFailure> merge_failures(std::vector<WorkerFailure> failures,
                                          const std::vector<WorkerFailure>& more) {
  for (const auto& failure : more) {
    const bool known = std::any_of(failures.begin(), failures.end(), [&](const auto& seen) {
      return seen.host == failure.host && seen.global_rank == failure.global_rank &&
             seen.pid == failure.pid;
    });
    if (!known)
      failures.push_back(failure);
  }
  sort_root_cause_first(failures);
  return failures;
}

}  // namespace ddprun::rendezvous::round
