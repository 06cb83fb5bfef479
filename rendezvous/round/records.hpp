#pragma once
// What nodes publish in the store and how ranks follow from it: node records, the per-node
// assignment the closing node publishes, and failure records. Pure: encoding, decoding with
// bounds (the store's contents are untrusted), ordering.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {

struct NodeRecord {
  std::string addr;  // --local_addr or FQDN: the node's identity and MASTER_ADDR if rank 0
  int64_t pid = 0;
  std::string nonce;  // tells apart handlers of one process (tests) and restarted agents
  int nproc_per_node = 1;
  std::optional<int> rank_hint;  // --node_rank / SLURM_NODEID
  int min_nodes = 1;
  int max_nodes = 1;
};

std::string encode_node_record(const NodeRecord& record);
// Throws CorruptRecord naming key (the record's) and the problem; RendezvousError with the
// message a node published there to fail the round ("error ...").
NodeRecord decode_node_record(std::string_view text, const std::string& key);

// One node's place in a formed round.
struct Assignment {
  int group_rank = 0;
  int group_world_size = 1;
  int base_global_rank = 0;
  int world_size = 1;
  int restart_count = 0;
  int neighbor_slot = 0;  // slot of the node with group rank + 1 (mod N): its heartbeat is ours
                          // to watch; 0 when alone
  int rank0_slot = 1;
};

// The closing node publishes either an assignment or an error every node raises.
std::string encode_assignment(const Assignment& assignment);
std::string encode_assignment_error(std::string_view message);
// Returns the assignment, or throws RendezvousError with the published error, or CorruptRecord
// naming key when the text is no assignment or its ranks do not fit together.
Assignment decode_assignment(std::string_view text, const std::string& key);

// Orders the round's nodes (records[i] holds slot i + 1): by rank hint, then address, then pid,
// so unchanged membership gives unchanged ranks. Throws RendezvousError when the nodes disagree
// on --nnodes. restart_count is copied into every assignment. Result is indexed by slot - 1.
std::vector<Assignment> assign_dynamic_ranks(const std::vector<NodeRecord>& records,
                                             int restart_count);

// Static backend: records[i] is the node with --node_rank i; checks every node agrees on
// --nnodes and gave its own rank.
std::vector<Assignment> assign_static_ranks(const std::vector<NodeRecord>& records,
                                            int restart_count);

// Failure records: one JSON object per line, appended to one key.
std::string encode_failure_line(const WorkerFailure& failure);
// Skips malformed lines; reads at most max_failures. Sorted root cause (earliest) first.
std::vector<WorkerFailure> decode_failure_lines(std::string_view text,
                                                std::size_t max_failures = 100000);

// Both lists as one, one entry per worker (host, rank and pid), root cause first: the round's
// failures as read, with this node's own that the read missed (appended after it, or lost).
std::vector<WorkerFailure> merge_failures(std::vector<WorkerFailure> failures,
                                          const std::vector<WorkerFailure>& more);

// "--nnodes" text for messages: "2" or "2:3".
std::string nnodes_text(int min_nodes, int max_nodes);

}  // namespace ddprun::rendezvous::round
