#pragma once
// StoreKv: the KvBackend over a TCPStore-protocol server: our ddprun-store, or PyTorch's own
// TCPStore server of either wire generation (G2: PyTorch >= 2.2, detected by its handshake;
// G0: PyTorch <= 2.0, the fallback when the server drops G2's opening). PyTorch 2.1's G1 is
// not spoken.
//
// Connections: one main connection carries every op but KvWait, pipelined (requests go out
// back to back; replies come in order). Each KvWait holds a connection of its own from a small
// pool while it waits, since a WAIT blocks its connection until the keys exist.
//
// How each op maps onto the protocol (keys are sent as key_prefix + key):
//   KvGet        CHECK [key], then GET when it exists (a GET of a missing key makes PyTorch's
//                legacy server drop the connection).
//   KvMultiGet   CHECK [all keys]; when all exist MULTI_GET (G0: one GET per key, pipelined),
//                else one CHECK per key, then the present keys as above.
//   KvSet        SET.             KvMultiSet  MULTI_SET (G0: one SET per key).
//   KvAdd        ADD.             KvBeat      ADD key 1.      KvProbe  ADD key 0.
//   KvCompareSet COMPARE_SET, with an empty expected value for "only if absent". TCPStore
//                cannot tell an absent key from an empty value: expected "" and nullopt both
//                mean "absent or empty". Its reply to a swap that did not happen because the
//                key is absent is `expected` itself; StoreKv answers nullopt then.
//   KvAppend     APPEND (G0 has none: emulated by reading the value and COMPARE_SET of
//                value + suffix, repeated while other writers win the race; it can be fooled
//                only by another writer appending the very same bytes at the same moment).
//   KvWait       WAIT on a pool connection; a timeout or cancel() sends CANCEL_WAIT (G0 cannot
//                cancel: the connection is closed instead). A timeout of zero or less is a
//                CHECK: KvReady{true} when the keys exist now.
// SET, MULTI_SET and APPEND get no reply in TCPStore: they complete when a later reply on the
// same connection shows that the server applied them.
//
// Failures (KvError.message names the op and the store):
//  - kUnreachable: an op in flight when its connection broke (the store closed or reset it);
//    the op may or may not have applied, and is never retried. Ops started while there is no
//    connection wait for one: up to connect_timeout before the first connection ever made,
//    up to reconnect_timeout afterwards (a wait's own connection, while the main one is open, up
//    to op_timeout: the store is up, only slow to accept). When that budget runs out, those ops
//    and every later one complete with kUnreachable: the store is gone for good.
//  - kUnresponsive: no answer within op_timeout; every op in flight on that connection fails
//    so, the connection is dropped, and the next op makes a new one.
//  - kProtocol: a reply broke the protocol or a limit (max_reply_bytes); the connection is
//    dropped like an unresponsive one.
//  - kRejected: an op the store cannot carry (MultiSet with unequal lengths, too many keys).
//  - kCorrupt: a TCPStore server closes the connection of an ADD (KvAdd, KvBeat, KvProbe,
//    KvTakeTicket, KvCountTickets) to a key that holds no integer or that the ADD would take
//    past int64 (PyTorch's std::stoll throws; ddprun's store does the same, PyTorch's clients
//    rely on it). That is junk another process wrote, not a lost store: when the main
//    connection breaks with such ADDs in flight, StoreKv reads their keys on a fresh
//    connection and, if one holds junk, fails every op that was in flight on the broken
//    connection with kCorrupt, its message corrupt_key_text() naming the key
//    (round/record_checks.hpp). Otherwise they fail kUnreachable as above.
//
// Threading: single-threaded on the caller's io_context; no threads of its own. Completions
// never run inside start(), cancel() or close().

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/backends/kv_backend.hpp"
#include "rendezvous/store/asio.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::backends {

struct StoreKvOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  // How long ops started before the first connection was ever made wait for it, retrying
  // refused connections with backoff: the store's host may start after this agent.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(600)};
  // How long ops wait for a new connection after an established one broke: short, since a
  // store that went away with its host's agent is not coming back.
  std::chrono::milliseconds reconnect_timeout{std::chrono::seconds(5)};
  // Deadline for the answer to every op but KvWait (and for each connection's handshake).
  std::chrono::milliseconds op_timeout{std::chrono::seconds(60)};
  // Longest reply accepted (a value, or all values of one MULTI_GET); a longer length from the
  // network is a protocol violation, noticed before anything is allocated for it.
  std::size_t max_reply_bytes = std::size_t{64} * 1024 * 1024;
  // Put in front of every key on the wire, to keep several rendezvous apart in one store.
  // (PyTorch's TCPStore client puts "/" in front of its keys: a Python peer's key "k" is "/k".)
  std::string key_prefix;
  // The job secret; set: each connection proves it knows it before any op (a store without a
  // secret lets it through). A store that refuses it fails the ops with KvErrorKind::kRejected.
  std::string secret;
  // Waits in progress at once; more wait for a connection to become free.
  std::size_t max_wait_connections = 16;
  // Free wait connections kept open for the next waits.
  std::size_t idle_wait_connections = 2;
};

class StoreKv final : public KvBackend {
 public:
  // Connects lazily, at the first op. Throws std::invalid_argument for options that cannot
  // work (no host or port, a timeout or limit of zero).
  StoreKv(boost::asio::io_context& io, StoreKvOptions options);
  ~StoreKv() override;

  // The wire generation the server speaks, once a connection got through its handshake.
  std::optional<store::WireGeneration> generation() const;

  void start(uint64_t id, round::KvOp op, Completion done) override;
  void cancel(uint64_t id) override;
  // Lets every started op finish, including waits (cancel those no longer wanted first),
  // then closes the connections and runs done.
  void close(std::function<void()> done) override;
  std::string describe() const override;

 private:
  class Core;
  std::shared_ptr<Core> core_;
};

}  // namespace ddprun::rendezvous::backends
