#include "agent/rdzv_static_handler.hpp"

#include <algorithm>
#include <charconv>

namespace ddprun::agent::rdzv {

StaticRendezvous::StaticRendezvous(const launcher::LaunchConfig& config, RdzvSettings settings,
                                   StoreEndpoint endpoint, std::string run_id,
                                   std::string local_addr)
    : StoreRendezvous(config, settings, std::move(endpoint), std::move(run_id),
                      std::move(local_addr)) {}

void StaticRendezvous::check_config(uint64_t round) {
  const std::string mine = nnodes_text(config().min_nodes, config().max_nodes);
  const std::string first = store().compare_set(keys().config(), "", mine);
  if (first == mine) {
    return;
  }
  const std::string message = "agents disagree on --nnodes: " + self().addr + " (--node_rank " +
                              std::to_string(config().node_rank) + ") has --nnodes " + mine +
                              " but the " + where() + " was started with --nnodes " +
                              first.substr(0, 64);
  // Node 0 waits for every slot's record: fill them with the error so it fails now, not after
  // join_timeout.
  int theirs = 0;
  const std::string_view max_text = std::string_view(first).substr(
      first.find(':') == std::string::npos ? 0 : first.find(':') + 1);
  std::from_chars(max_text.data(), max_text.data() + max_text.size(), theirs);
  const int slots = std::clamp(std::max(theirs, config().max_nodes), 1, 1 << 16);
  const auto record_keys = keys().for_slots(slots, [&](int s) { return keys().node(round, s); });
  store().multi_set(record_keys, std::vector<std::string>(record_keys.size(), "error " + message));
  throw RendezvousError(message);
}

void StaticRendezvous::close_later_rounds(uint64_t round, const std::string& error) {
  // Every node is needed for a static round, so the next one cannot have formed without this
  // node: node 0 waits for records, the others for assignments. Fill both with the error.
  const int nodes = config().max_nodes;
  auto later_keys = keys().for_slots(nodes, [&](int s) { return keys().node(round + 1, s); });
  for (int s = 1; s <= nodes; ++s) {
    later_keys.push_back(keys().assignment(round + 1, s));
  }
  store().multi_set(later_keys, std::vector<std::string>(later_keys.size(), error));
}

FormedRound StaticRendezvous::join(const std::optional<FormedRound>& previous) {
  const int nodes = config().max_nodes;  // torchrun: the static world is MAX nodes
  const int rank = config().node_rank;
  const uint64_t round =
      previous ? previous->round + 1 : static_cast<uint64_t>(store().add(keys().restarts(), 0));
  const int slot = rank + 1;
  const auto join_wait = millis(settings().join_timeout_s);

  if (!previous) {
    check_config(round);
  }
  NodeRecord record = self();
  record.rank_hint = rank;
  store().set(keys().node(round, slot), encode_node_record(record));
  if (rank == 0) {
    const auto record_keys = keys().for_slots(nodes, [&](int s) { return keys().node(round, s); });
    const auto assign_keys =
        keys().for_slots(nodes, [&](int s) { return keys().assignment(round, s); });
    if (!store().wait(record_keys, join_wait)) {
      int present = 0;
      for (const auto& key : record_keys) {
        present += store().check({key}) ? 1 : 0;
      }
      throw RendezvousError(where() + ": timed out after " +
                            seconds_text(settings().join_timeout_s) +
                            " s (join_timeout): " + std::to_string(present) + " of " +
                            std::to_string(nodes) + " nodes (--nnodes) joined");
    }
    std::vector<std::string> values;
    try {
      const auto texts = store().multi_get(record_keys);
      std::vector<NodeRecord> records;
      for (std::size_t i = 0; i < texts.size(); ++i) {
        records.push_back(decode_node_record(texts[i], static_cast<int>(i) + 1));
      }
      const int restarts = static_cast<int>(store().add(keys().restarts(), 0));
      for (const auto& a : assign_static_ranks(records, restarts)) {
        values.push_back(encode_assignment(a));
      }
    } catch (const RendezvousError& error) {
      values.assign(assign_keys.size(), encode_assignment_error(error.what()));
    }
    store().multi_set(assign_keys, values);
    store().set(keys().closed(round), std::to_string(nodes));
  }
  FormedRound formed;
  formed.round = round;
  formed.slot = slot;
  formed.assignment = decode_assignment(store().get(keys().assignment(round, slot), join_wait));
  formed.master_addr = config().rdzv_host.empty() ? config().master_addr : config().rdzv_host;
  formed.master_port = config().rdzv_port.value_or(config().master_port);
  return formed;
}

}  // namespace ddprun::agent::rdzv
