#pragma once
// The key-value operations the round machine asks of its store, as plain values, and the
// answers a backend gives. The machine never talks to a store itself: it emits a KvOp with an
// id, a backend (backends/: a TCPStore-protocol store, or etcd v3) carries it out, and the
// driver feeds the KvResult back with the same id.
//
// Semantics follow PyTorch's TCPStore, so every backend gives the machine the same world:
//  - keys and values are byte strings; the machine never deletes a key;
//  - a counter is a key whose value is decimal text (KvAdd creates it from 0);
//  - every op applies atomically on its own; a multi-key op need not be atomic as a whole,
//    but each of its keys is updated exactly once.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ddprun::rendezvous::round {

// Reads one key; never blocks. Answer: KvValue (nullopt when the key does not exist).
struct KvGet {
  std::string key;
};
// Reads several keys. Answer: KvValues, one entry per key, in order.
struct KvMultiGet {
  std::vector<std::string> keys;
};
// Answer: KvDone.
struct KvSet {
  std::string key;
  std::string value;
};
// keys.size() == values.size(). Answer: KvDone once every key is set.
struct KvMultiSet {
  std::vector<std::string> keys;
  std::vector<std::string> values;
};
// Adds delta to a counter; a missing key counts as 0. Answer: KvCounter, the value after.
struct KvAdd {
  std::string key;
  int64_t delta = 0;
};
// Stores desired when the current value equals expected (nullopt: when the key does not
// exist). Answer: KvValue holding what the key holds afterwards (desired if the swap happened).
// TCPStore cannot tell an absent key from an empty value: over it, expected "" acts as nullopt
// and nullopt also swaps an empty value. Keep empty values out of compare-set keys.
struct KvCompareSet {
  std::string key;
  std::optional<std::string> expected;
  std::string desired;
};
// Appends to a value; a missing key counts as empty. Answer: KvDone.
struct KvAppend {
  std::string key;
  std::string value;
};
// Waits until every key exists. Answer: KvReady{true}, or KvReady{false} once timeout passed.
// A timeout of zero or less asks whether the keys exist now (it is not "forever"). A backend
// that saw the values on the way (etcd reads and watches them) may hand them over in
// KvReady::values, which saves the machine a read of keys that are written only once.
// The one op that may stay pending for long; the machine cancels it when it stops caring.
struct KvWait {
  std::vector<std::string> keys;
  std::chrono::milliseconds timeout{0};
};
// This node is alive. A counting backend increments the key; a lease backend (etcd) holds the
// key under the agent's lease and keeps the lease alive. Answer: KvDone.
struct KvBeat {
  std::string key;
};
// Reads a peer's beat key. Answer: KvLiveness.
struct KvProbe {
  std::string key;
};

// Counts member in at key, once per member: a ticket dispenser that many nodes draw from at
// once (joining a round, leaving it). Answer: KvCounter, this member's position in arrival
// order, 1-based. A counting backend increments a counter (draw each member once: the machine
// does); etcd puts key/member and counts the keys created up to it, so no draw conflicts with
// another (one hot counter would make every draw a compare-and-swap race).
struct KvTakeTicket {
  std::string key;
  std::string member;
};
// How many tickets were drawn at key. Answer: KvCounter.
struct KvCountTickets {
  std::string key;
};

using KvOp = std::variant<KvGet, KvMultiGet, KvSet, KvMultiSet, KvAdd, KvCompareSet, KvAppend,
                          KvWait, KvBeat, KvProbe, KvTakeTicket, KvCountTickets>;

struct KvDone {};
struct KvValue {
  std::optional<std::string> value;
};
struct KvValues {
  std::vector<std::optional<std::string>> values;
};
struct KvCounter {
  int64_t value = 0;
};
struct KvReady {
  KvReady() = default;
  // A constructor, so that the answers without values need not name them.
  explicit KvReady(bool ready_now, std::vector<std::string> seen = {})
      : ready(ready_now), values(std::move(seen)) {}

  bool ready = false;
  // Empty, or (ready only) one value per key of the wait, in its order: what the key held
  // when the backend saw it exist. Later writes may have changed it since.
  std::vector<std::string> values;
};
// counter changes while the peer beats (a lease backend gives a fresh value on every probe
// while the key exists). gone: the key exists no more, so its lease expired; before the peer
// ever beat it is simply absent, which the machine treats as a counter that does not move.
struct KvLiveness {
  int64_t counter = 0;
  bool gone = false;
};

enum class KvErrorKind {
  kUnreachable,   // no connection could be made, or it broke (refused, reset, every member)
  kUnresponsive,  // connected, but no answer within the backend's operation timeout
  kProtocol,      // the answer was malformed or broke a limit: a broken or hostile server
  kRejected,      // the store refused the op with a reason (etcd: no quorum, request too big)
  kCorrupt,       // a key the op read or counted holds junk another process wrote there (a
                  // counter that is no integer, or one an ADD would overflow); the message is
                  // corrupt_key_text(): "the key '...' is corrupt: ..." (record_checks.hpp)
};
struct KvError {
  KvErrorKind kind = KvErrorKind::kUnreachable;
  std::string message;  // names the store and what failed, ready for the user
};

using KvResult = std::variant<KvDone, KvValue, KvValues, KvCounter, KvReady, KvLiveness, KvError>;

}  // namespace ddprun::rendezvous::round
