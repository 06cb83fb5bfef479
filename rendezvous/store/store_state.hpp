#pragma once
// The store's data and its waiters, and what each request does to them: the TCPStore
// semantics of tcpstore_protocol.md §4, free of sockets and clocks. The server feeds it
// decoded requests and delivers the messages it produces.
//
// Choices where PyTorch's two servers differ: GET/MULTI_GET of a missing key answer an empty
// value (libuv) rather than closing; COMPARE_SET wakes waiters only when it wrote the key
// (legacy never wakes, libuv always, even when the key stays absent).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rendezvous/store/memory_budget.hpp"
#include "rendezvous/store/request.hpp"

namespace ddprun::rendezvous::store {

using ConnectionId = std::uint64_t;

// Bytes for one connection, in the order produced.
struct OutgoingMessage {
  ConnectionId to = 0;
  std::string bytes;
};

class StoreState {
 public:
  // One budget for everything (a store without a job secret).
  explicit StoreState(MemoryBudget& budget) : StoreState(budget, budget) {}
  // With a job secret: the agents' keys (job_auth.hpp) are charged to `agents`, every other key
  // (which any client may write) to `open`, so that strangers cannot fill the agents' budget.
  StoreState(MemoryBudget& agents, MemoryBudget& open)
      : agents_budget_(agents), open_budget_(open) {}
  StoreState(const StoreState&) = delete;
  StoreState& operator=(const StoreState&) = delete;
  ~StoreState();

  // Applies one request from `from`, appending replies and wake-ups to `out`. Returns an
  // error when the request cannot be served (non-numeric ADD, memory budget exhausted); the
  // caller then closes that connection. State is unchanged by a failed request.
  std::optional<std::string> handle(ConnectionId from, Request& request,
                                    std::vector<OutgoingMessage>& out);

  // Forgets everything a closed connection registered (waits, watches).
  void disconnect(ConnectionId connection);

  std::size_t num_keys() const { return values_.size(); }
  std::size_t pending_waits() const { return waits_.size(); }

 private:
  using WaitId = std::uint64_t;
  // One WAIT (or parked BARRIER) not yet satisfied. A connection may hold several: a G0
  // client that timed out sends nothing, so its old WAIT stays and is answered later, as
  // PyTorch's server does.
  struct PendingWait {
    ConnectionId connection = 0;
    std::size_t missing = 0;         // registrations still to be satisfied
    std::vector<std::string> keys;   // every key registered, for cancel/disconnect
    std::size_t reserved_bytes = 0;  // charged to `charged`
    MemoryBudget* charged = nullptr;
  };

  MemoryBudget& budget_for(std::string_view key) const;

  bool exists(const std::string& key) const;
  // Stores a value, charging the budget; false when it does not fit.
  bool store_value(const std::string& key, std::string value, std::vector<OutgoingMessage>& out);
  void wake_all(const std::string& key, std::vector<OutgoingMessage>& out);
  void wake_one(const std::string& key, std::vector<OutgoingMessage>& out);
  void satisfy_one(WaitId wait, std::vector<OutgoingMessage>& out);
  void finish_wait(WaitId wait);
  std::optional<std::string> register_wait(ConnectionId from, const std::vector<std::string>& keys,
                                           std::vector<OutgoingMessage>& out);
  void cancel_waits(ConnectionId connection);
  void notify_watchers(std::uint8_t kind, const std::string& key, const std::string& old_value,
                       const std::string& new_value, std::vector<OutgoingMessage>& out);

  // Adds delta to the counter at key (0 when absent) and stores the sum; the error, naming op,
  // when the key holds something else than an integer, the sum overflows int64, or the memory
  // budget is exhausted.
  std::optional<std::string> add_to_counter(std::string_view op, const std::string& key,
                                            std::int64_t delta, std::int64_t& sum,
                                            std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_add(ConnectionId from, Request& request,
                                        std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_compare_set(ConnectionId from, Request& request,
                                                std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_barrier(ConnectionId from, Request& request,
                                            std::vector<OutgoingMessage>& out);
  // QUEUE_PUSH has no reply.
  std::optional<std::string> handle_queue_push(Request& request, std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_queue_pop(ConnectionId from, Request& request,
                                              std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_set(Request& request, std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_watch_key(ConnectionId from, Request& request,
                                              std::vector<OutgoingMessage>& out);
  void handle_delete(ConnectionId from, Request& request, std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_append(Request& request, std::vector<OutgoingMessage>& out);
  std::optional<std::string> handle_multi_set(Request& request, std::vector<OutgoingMessage>& out);
  // The reply to a request that changes nothing (GET, CHECK, ...); nullopt for the others.
  std::optional<std::string> read_only_reply(const Request& request) const;
  std::string multi_get_reply(const Request& request) const;
  std::string list_keys_reply(const Request& request) const;

  MemoryBudget& agents_budget_;
  MemoryBudget& open_budget_;
  std::unordered_map<std::string, std::string> values_;              // key -> value
  std::unordered_map<std::string, std::deque<std::string>> queues_;  // name -> FIFO items
  // key -> waits registered on it, one entry per registration (a key listed twice in a
  // WAIT appears twice, so one SET satisfies both, as in PyTorch).
  std::unordered_map<std::string, std::vector<WaitId>> waiters_;
  std::unordered_map<WaitId, PendingWait> waits_;                   // wait -> its state
  std::unordered_map<ConnectionId, std::vector<WaitId>> waits_of_;  // connection -> its waits
  WaitId next_wait_ = 1;
  // G0 WATCH_KEY: key -> callback connections watching it.
  std::unordered_map<std::string, std::vector<ConnectionId>> watchers_;
  std::unordered_map<ConnectionId, std::vector<std::string>> watched_by_;
};

}  // namespace ddprun::rendezvous::store
