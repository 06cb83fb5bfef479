#include "rendezvous/store/store_state.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/store_log.hpp"
#include "rendezvous/store/wire_codec.hpp"

namespace ddprun::rendezvous::store {
namespace {

// Removes key's entry from lists and returns its list (empty when there was none).
template <class Lists>
typename Lists::mapped_type take_list(Lists& lists, const typename Lists::key_type& key) {
  const auto found = lists.find(key);
  if (found == lists.end()) {
    return {};
  }
  auto list = std::move(found->second);
  lists.erase(found);
  return list;
}

// Removes id from the list under key, and the entry once its list is empty, so that finished
// and cancelled waits leave nothing behind.
template <class Lists, class Id>
void remove_from_list(Lists& lists, const typename Lists::key_type& key, Id id) {
  const auto found = lists.find(key);
  if (found == lists.end()) {
    return;
  }
  std::erase(found->second, id);
  if (found->second.empty()) {
    lists.erase(found);
  }
}

// Rough per-entry bookkeeping cost (hash node, string headers), charged on top of the
// bytes themselves so that many tiny keys cannot dodge the budget.
constexpr std::size_t kEntryOverhead = 64;
constexpr std::size_t kRegistrationOverhead = 48;

std::size_t entry_cost(const std::string& key, const std::string& value) {
  return key.size() + value.size() + kEntryOverhead;
}

std::string one_byte(std::uint8_t value) {
  return std::string(1, static_cast<char>(value));
}

std::string encoded_i64(std::int64_t value) {
  std::string bytes;
  wire::append_i64(bytes, value);
  return bytes;
}

std::string encoded_bytes(const std::string& value) {
  std::string bytes;
  bytes.reserve(8 + value.size());
  wire::append_bytes(bytes, value);
  return bytes;
}

// ADD keeps counters as ASCII decimal. Like PyTorch's std::stoll: leading blanks and a sign
// are accepted, trailing bytes ignored, no digits or overflow is an error.
std::optional<std::int64_t> parse_counter(const std::string& text) {
  std::size_t start = 0;
  while (start < text.size() && (text[start] == ' ' || text[start] == '\t' || text[start] == '\n' ||
                                 text[start] == '\r')) {
    ++start;
  }
  if (start < text.size() && text[start] == '+') {
    ++start;
  }
  std::int64_t value = 0;
  const auto* first = text.data() + start;
  const auto* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end == first) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

StoreState::~StoreState() {
  // Give back everything this state charged, so an embedding server's budget balances.
  for (const auto& [key, value] : values_) {
    budget_for(key).release(entry_cost(key, value));
  }
  for (const auto& [name, items] : queues_) {
    for (const auto& item : items) {
      budget_for(name).release(entry_cost(name, item));
    }
  }
  for (const auto& [id, wait] : waits_) {
    wait.charged->release(wait.reserved_bytes);
  }
  for (const auto& [connection, keys] : watched_by_) {
    for (const auto& key : keys) {
      budget_for(key).release(key.size() + kRegistrationOverhead);
    }
  }
}

MemoryBudget& StoreState::budget_for(std::string_view key) const {
  return is_agent_key(key) ? agents_budget_ : open_budget_;
}

bool StoreState::exists(const std::string& key) const {
  if (values_.contains(key)) {
    return true;
  }
  const auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

bool StoreState::store_value(const std::string& key, std::string value,
                             std::vector<OutgoingMessage>& out) {
  const auto found = values_.find(key);
  const std::size_t new_cost = entry_cost(key, value);
  const std::size_t old_cost = found == values_.end() ? 0 : entry_cost(key, found->second);
  MemoryBudget& budget = budget_for(key);
  if (new_cost > old_cost && !budget.try_reserve(new_cost - old_cost)) {
    return false;
  }
  if (old_cost > new_cost) {
    budget.release(old_cost - new_cost);
  }
  if (found == values_.end()) {
    if (watchers_.contains(key)) {
      notify_watchers(kWatchKeyCreated, key, std::string(), value, out);
    }
    values_.emplace(key, std::move(value));
  } else {
    if (watchers_.contains(key)) {
      notify_watchers(kWatchKeyUpdated, key, found->second, value, out);
    }
    found->second = std::move(value);
  }
  return true;
}

void StoreState::wake_all(const std::string& key, std::vector<OutgoingMessage>& out) {
  for (const WaitId id : take_list(waiters_, key)) {
    satisfy_one(id, out);
  }
}

void StoreState::wake_one(const std::string& key, std::vector<OutgoingMessage>& out) {
  const auto found = waiters_.find(key);
  if (found == waiters_.end()) {
    return;
  }
  const WaitId id = found->second.front();
  found->second.erase(found->second.begin());
  if (found->second.empty()) {
    waiters_.erase(found);
  }
  satisfy_one(id, out);
}

void StoreState::satisfy_one(WaitId id, std::vector<OutgoingMessage>& out) {
  const auto found = waits_.find(id);
  if (found == waits_.end()) {
    return;
  }
  if (--found->second.missing == 0) {
    out.push_back({found->second.connection, one_byte(kStopWaiting)});
    finish_wait(id);
  }
}

void StoreState::finish_wait(WaitId id) {
  const auto found = waits_.find(id);
  if (found == waits_.end()) {
    return;
  }
  found->second.charged->release(found->second.reserved_bytes);
  remove_from_list(waits_of_, found->second.connection, id);
  waits_.erase(found);
}

std::optional<std::string> StoreState::register_wait(ConnectionId from,
                                                     const std::vector<std::string>& keys,
                                                     std::vector<OutgoingMessage>& out) {
  PendingWait wait;
  wait.connection = from;
  for (const auto& key : keys) {
    if (!exists(key)) {
      ++wait.missing;
      wait.reserved_bytes += key.size() + kRegistrationOverhead;
      wait.keys.push_back(key);
    }
  }
  if (wait.missing == 0) {
    out.push_back({from, one_byte(kStopWaiting)});
    return std::nullopt;
  }
  wait.charged = &budget_for(wait.keys.front());
  if (!wait.charged->try_reserve(wait.reserved_bytes)) {
    return "memory budget exhausted by a WAIT on " + std::to_string(keys.size()) + " keys";
  }
  const WaitId id = next_wait_++;
  for (const auto& key : wait.keys) {
    waiters_[key].push_back(id);
  }
  waits_of_[from].push_back(id);
  waits_.emplace(id, std::move(wait));
  return std::nullopt;
}

void StoreState::cancel_waits(ConnectionId connection) {
  for (const WaitId id : take_list(waits_of_, connection)) {
    const auto found = waits_.find(id);
    if (found == waits_.end()) {
      continue;
    }
    for (const auto& key : found->second.keys) {
      remove_from_list(waiters_, key, id);
    }
    found->second.charged->release(found->second.reserved_bytes);
    waits_.erase(found);
  }
}

void StoreState::notify_watchers(std::uint8_t kind, const std::string& key,
                                 const std::string& old_value, const std::string& new_value,
                                 std::vector<OutgoingMessage>& out) {
  const auto found = watchers_.find(key);
  if (found == watchers_.end()) {
    return;
  }
  for (const ConnectionId watcher : found->second) {
    std::string bytes;
    wire::append_u8(bytes, kind);
    wire::append_bytes(bytes, key);
    wire::append_bytes(bytes, old_value);
    wire::append_bytes(bytes, new_value);
    out.push_back({watcher, std::move(bytes)});
  }
}

void StoreState::disconnect(ConnectionId connection) {
  cancel_waits(connection);
  const auto watched = watched_by_.find(connection);
  if (watched == watched_by_.end()) {
    return;
  }
  for (const auto& key : watched->second) {
    budget_for(key).release(key.size() + kRegistrationOverhead);
    const auto list = watchers_.find(key);
    if (list != watchers_.end()) {
      std::erase(list->second, connection);
      if (list->second.empty()) {
        watchers_.erase(list);
      }
    }
  }
  watched_by_.erase(watched);
}

std::optional<std::string> StoreState::add_to_counter(std::string_view op, const std::string& key,
                                                      std::int64_t delta, std::int64_t& sum,
                                                      std::vector<OutgoingMessage>& out) {
  std::int64_t current = 0;
  if (const auto found = values_.find(key); found != values_.end()) {
    const auto parsed = parse_counter(found->second);
    if (!parsed) {
      return std::string(op) + " on key '" + printable_key(key) + "' whose value is not an integer";
    }
    current = *parsed;
  }
  if (__builtin_add_overflow(current, delta, &sum)) {
    return std::string(op) + " on key '" + printable_key(key) + "' overflows int64";
  }
  if (!store_value(key, std::to_string(sum), out)) {
    return "memory budget exhausted by " + std::string(op);
  }
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_add(ConnectionId from, Request& request,
                                                  std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  std::int64_t sum = 0;
  if (auto error = add_to_counter("ADD", key, request.integer, sum, out)) {
    return error;
  }
  wake_all(key, out);
  out.push_back({from, encoded_i64(sum)});
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_compare_set(ConnectionId from, Request& request,
                                                          std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  std::string& expected = request.values[0];
  std::string& desired = request.values[1];
  const auto found = values_.find(key);
  const bool swap = found == values_.end() ? expected.empty() : found->second == expected;
  if (!swap) {
    // A missing key with a non-empty expectation answers `expected` (PyTorch does the same).
    out.push_back({from, encoded_bytes(found == values_.end() ? expected : found->second)});
    return std::nullopt;
  }
  std::string reply = encoded_bytes(desired);
  if (!store_value(key, std::move(desired), out)) {
    return "memory budget exhausted by COMPARE_SET";
  }
  wake_all(key, out);
  out.push_back({from, std::move(reply)});
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_barrier(ConnectionId from, Request& request,
                                                      std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  std::int64_t arrived = 0;
  if (auto error = add_to_counter("BARRIER", key, 1, arrived, out)) {
    return error;
  }
  if (arrived >= request.integer) {
    out.push_back({from, one_byte(kStopWaiting)});
    wake_all(key, out);
    return std::nullopt;
  }
  // Park the caller as a one-key waiter on the barrier key, woken when the last one arrives.
  PendingWait wait;
  wait.connection = from;
  wait.missing = 1;
  wait.keys.push_back(key);
  wait.reserved_bytes = key.size() + kRegistrationOverhead;
  wait.charged = &budget_for(key);
  if (!wait.charged->try_reserve(wait.reserved_bytes)) {
    return "memory budget exhausted by BARRIER";
  }
  const WaitId id = next_wait_++;
  waiters_[key].push_back(id);
  waits_of_[from].push_back(id);
  waits_.emplace(id, std::move(wait));
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_queue_push(Request& request,
                                                         std::vector<OutgoingMessage>& out) {
  const std::string& name = request.keys[0];
  if (!budget_for(name).try_reserve(entry_cost(name, request.values[0]))) {
    return "memory budget exhausted by QUEUE_PUSH to '" + printable_key(name) + "'";
  }
  queues_[name].push_back(std::move(request.values[0]));
  wake_one(name, out);
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_queue_pop(ConnectionId from, Request& request,
                                                        std::vector<OutgoingMessage>& out) {
  const std::string& name = request.keys[0];
  const auto found = queues_.find(name);
  if (found == queues_.end() || found->second.empty()) {
    out.push_back({from, encoded_i64(0)});
    return std::nullopt;
  }
  std::string reply = encoded_i64(static_cast<std::int64_t>(found->second.size()));
  wire::append_bytes(reply, found->second.front());
  budget_for(name).release(entry_cost(name, found->second.front()));
  found->second.pop_front();
  if (found->second.empty()) {
    queues_.erase(found);
  }
  out.push_back({from, std::move(reply)});
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_set(Request& request,
                                                  std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  if (!store_value(key, std::move(request.values[0]), out)) {
    return "memory budget exhausted by SET of key '" + printable_key(key) + "'";
  }
  wake_all(key, out);
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_watch_key(ConnectionId from, Request& request,
                                                        std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  if (!budget_for(key).try_reserve(key.size() + kRegistrationOverhead)) {
    return "memory budget exhausted by WATCH_KEY";
  }
  watchers_[key].push_back(from);
  watched_by_[from].push_back(key);
  out.push_back({from, one_byte(kWatchCallbackRegistered)});
  return std::nullopt;
}

void StoreState::handle_delete(ConnectionId from, Request& request,
                               std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  const auto found = values_.find(key);
  std::int64_t removed = 0;
  if (found != values_.end()) {
    if (watchers_.contains(key)) {
      notify_watchers(kWatchKeyDeleted, key, found->second, std::string(), out);
    }
    budget_for(key).release(entry_cost(key, found->second));
    values_.erase(found);
    removed = 1;
  }
  out.push_back({from, encoded_i64(removed)});
}

std::optional<std::string> StoreState::handle_append(Request& request,
                                                     std::vector<OutgoingMessage>& out) {
  const std::string& key = request.keys[0];
  const auto found = values_.find(key);
  std::string combined =
      found == values_.end() ? std::move(request.values[0]) : found->second + request.values[0];
  if (!store_value(key, std::move(combined), out)) {
    return "memory budget exhausted by APPEND to key '" + printable_key(key) + "'";
  }
  wake_all(key, out);
  return std::nullopt;
}

std::optional<std::string> StoreState::handle_multi_set(Request& request,
                                                        std::vector<OutgoingMessage>& out) {
  // Check the whole request against the budgets first, so it applies all or nothing.
  std::size_t agents_growth = 0;
  std::size_t open_growth = 0;
  for (std::size_t i = 0; i < request.keys.size(); ++i) {
    (is_agent_key(request.keys[i]) ? agents_growth : open_growth) +=
        entry_cost(request.keys[i], request.values[i]);
  }
  const auto fits = [](const MemoryBudget& budget, std::size_t growth) {
    return growth <= budget.limit() - budget.used();
  };
  const bool shared = &agents_budget_ == &open_budget_;
  if (shared ? !fits(agents_budget_, agents_growth + open_growth)
             : !fits(agents_budget_, agents_growth) || !fits(open_budget_, open_growth)) {
    return "memory budget exhausted by MULTI_SET of " + std::to_string(request.keys.size()) +
           " keys";
  }
  for (std::size_t i = 0; i < request.keys.size(); ++i) {
    if (!store_value(request.keys[i], std::move(request.values[i]), out)) {
      return "memory budget exhausted by MULTI_SET";
    }
    wake_all(request.keys[i], out);
  }
  return std::nullopt;
}

std::string StoreState::multi_get_reply(const Request& request) const {
  std::string reply;
  for (const auto& key : request.keys) {
    const auto found = values_.find(key);
    wire::append_bytes(reply, found == values_.end() ? std::string_view() : found->second);
  }
  return reply;
}

std::string StoreState::list_keys_reply(const Request& request) const {
  const auto listed = [&request](const std::string& key) {
    return !request.hide_agent_keys || !is_agent_key(key);
  };
  std::string reply;
  wire::append_u64(reply, static_cast<std::uint64_t>(std::count_if(
                              values_.begin(), values_.end(),
                              [&listed](const auto& entry) { return listed(entry.first); })));
  for (const auto& [key, value] : values_) {
    if (listed(key)) {
      wire::append_bytes(reply, key);
    }
  }
  return reply;
}

// Answers a request that changes nothing, or nullopt when the request is not one of those.
std::optional<std::string> StoreState::read_only_reply(const Request& request) const {
  switch (request.command) {
    case Command::get: {
      const auto found = values_.find(request.keys[0]);
      return encoded_bytes(found == values_.end() ? std::string() : found->second);
    }
    case Command::check: {
      const bool ready = std::all_of(request.keys.begin(), request.keys.end(),
                                     [this](const std::string& key) { return exists(key); });
      return one_byte(ready ? kCheckReady : kCheckNotReady);
    }
    case Command::get_num_keys:
      return encoded_i64(static_cast<std::int64_t>(values_.size()));
    case Command::multi_get:
      return multi_get_reply(request);
    case Command::ping: {
      std::string reply;
      wire::append_u32(reply, request.word);
      return reply;
    }
    case Command::queue_len: {
      const auto found = queues_.find(request.keys[0]);
      const std::size_t length = found == queues_.end() ? 0 : found->second.size();
      return encoded_i64(static_cast<std::int64_t>(length));
    }
    case Command::list_keys:
      return list_keys_reply(request);
    default:
      return std::nullopt;
  }
}

std::optional<std::string> StoreState::handle(ConnectionId from, Request& request,
                                              std::vector<OutgoingMessage>& out) {
  if (auto reply = read_only_reply(request)) {
    out.push_back({from, std::move(*reply)});
    return std::nullopt;
  }
  switch (request.command) {
    case Command::validate:
      return std::nullopt;
    case Command::set:
      return handle_set(request, out);
    case Command::compare_set:
      return handle_compare_set(from, request, out);
    case Command::add:
      return handle_add(from, request, out);
    case Command::wait:
      return register_wait(from, request.keys, out);
    case Command::watch_key:
      return handle_watch_key(from, request, out);
    case Command::delete_key:
      handle_delete(from, request, out);
      return std::nullopt;
    case Command::append:
      return handle_append(request, out);
    case Command::multi_set:
      return handle_multi_set(request, out);
    case Command::cancel_wait:
      cancel_waits(from);
      out.push_back({from, one_byte(kWaitCanceled)});
      return std::nullopt;
    case Command::queue_push:
      return handle_queue_push(request, out);
    case Command::queue_pop:
      return handle_queue_pop(from, request, out);
    case Command::barrier:
      return handle_barrier(from, request, out);
    case Command::auth_hello:
    case Command::auth_proof:
      return std::string(command_name(request.command)) + " is answered by the connection";
    default:
      return "unhandled command";
  }
}

}  // namespace ddprun::rendezvous::store
