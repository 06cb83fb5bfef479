#pragma once
// Every value the machine reads from the store is checked where it enters, once: the store is
// shared with whoever can reach it, so a record may hold anything (junk from a stale job with
// the same --rdzv_id, or from someone else on the network). A value that fails its check is a
// CorruptRecord naming the key and what is wrong; the machine stops the round with
// corrupt_rendezvous_message(), never with a crash, a hang or "lost the connection".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/round/round_info.hpp"

namespace ddprun::rendezvous::round {

// what(): "the key 'K' is corrupt: <problem>".
class CorruptRecord : public RendezvousError {
 public:
  CorruptRecord(const std::string& key, const std::string& problem);
};

// "the key 'K' is corrupt: <problem>" (the key quoted with non-printable bytes escaped).
std::string corrupt_key_text(std::string_view key, std::string_view problem);
// The message every agent stops with: run_id, the corrupt key and who likely wrote it.
std::string corrupt_rendezvous_message(std::string_view run_id, std::string_view corrupt_key);
// How a bad value shows in a message: short printable text quoted, otherwise its size
// ("12 bytes", "4194304 bytes", "an empty value").
std::string shown_value(std::string_view value);

// Longest value of each kind the machine accepts (far above what any agent writes).
inline constexpr std::size_t kMaxNodeRecordBytes = 4096;
inline constexpr std::size_t kMaxPublishedErrorBytes = 4096;
inline constexpr std::size_t kMaxTokenBytes = 128;
inline constexpr std::size_t kMaxAddressBytes = 2048;
// Node and ticket counts, rounds and restart counts: bounds no real job reaches, far below the
// counters' int64 range (an ADD of 2^62 stands out, and sums of bounded counts cannot overflow).
inline constexpr int64_t kMaxCount = int64_t{1} << 20;
inline constexpr uint64_t kMaxRound = uint64_t{1} << 40;
inline constexpr int64_t kMaxRestarts = int64_t{1} << 30;

// A counter from an ADD, within [lo, hi]; `what` names what it counts ("joined nodes").
int64_t checked_counter(int64_t value, int64_t lo, int64_t hi, const std::string& key,
                        const char* what);
// Decimal text of a count within [lo, hi] (no sign, no blanks, no leading zeros but "0").
int parse_count(std::string_view text, int lo, int hi, const std::string& key, const char* what);
// A round number, within kMaxRound; a missing key is corrupt too (it was just set).
uint64_t parse_round_number(const std::optional<std::string>& text, const std::string& key);
// "--nnodes" text as nnodes_text() writes it: "N" or "MIN:MAX" with 1 <= MIN <= MAX.
struct NnodesText {
  int min_nodes = 1;
  int max_nodes = 1;
};
NnodesText parse_nnodes_text(std::string_view text, const std::string& key);
// The message after "error " in a value an agent published to fail the others: bounded, one
// printable line.
std::string published_error(std::string_view message, const std::string& key);
// A claim's holder (an agent's nonce): bounded printable text.
void check_token(const std::optional<std::string>& value, const std::string& key);

}  // namespace ddprun::rendezvous::round
