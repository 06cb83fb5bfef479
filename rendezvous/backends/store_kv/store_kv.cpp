#include "rendezvous/backends/store_kv/store_kv.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/overloaded.hpp"
#include "rendezvous/backends/store_kv/store_kv_connection.hpp"
#include "rendezvous/backends/store_kv/store_kv_dialer.hpp"
#include "rendezvous/backends/store_kv/store_kv_requests.hpp"
#include "rendezvous/round/record_checks.hpp"

namespace ddprun::rendezvous::backends {
namespace {

using namespace round;  // the KvOp and KvResult vocabulary
using Clock = std::chrono::steady_clock;
using Connection = StoreKvConnection;
using ConnectionPtr = std::shared_ptr<StoreKvConnection>;
using Failure = StoreKvConnection::Failure;
using Outcome = StoreKvConnection::Outcome;
using Reply = StoreKvConnection::Reply;
using ReplyShape = StoreKvConnection::ReplyShape;

// PyTorch's libuv server closes a connection whose request lists more keys (MAX_KEY_COUNT);
// ours has the same default.
constexpr std::size_t kMaxKeysPerRequest = 131072;
// G0's emulated APPEND gives up after losing the compare-and-set race this often.
constexpr int kMaxAppendAttempts = 1000;
// Keys are quoted in messages up to this length.
constexpr std::size_t kMaxQuotedKeyBytes = 80;

std::string quote(const std::string& key) {
  std::string text = "'";
  for (std::size_t i = 0; i < key.size() && i < kMaxQuotedKeyBytes; ++i) {
    const auto byte = static_cast<unsigned char>(key[i]);
    if (byte >= 0x20 && byte < 0x7F) {
      text.push_back(static_cast<char>(byte));
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      text += "\\x";
      text.push_back(kHex[byte >> 4]);
      text.push_back(kHex[byte & 0xF]);
    }
  }
  if (key.size() > kMaxQuotedKeyBytes) {
    text += "...";
  }
  return text + "'";
}

std::string quote_keys(const std::vector<std::string>& keys) {
  if (keys.size() == 1) {
    return quote(keys.front());
  }
  std::string text = std::to_string(keys.size()) + " keys";
  if (!keys.empty()) {
    text += " (" + quote(keys.front()) + ", ...)";
  }
  return text;
}

// The op as messages name it.
std::string describe_op(const KvOp& op) {
  struct Describe {
    std::string operator()(const KvGet& get) const { return "GET " + quote(get.key); }
    std::string operator()(const KvMultiGet& get) const {
      return "MULTI_GET of " + quote_keys(get.keys);
    }
    std::string operator()(const KvSet& set) const { return "SET " + quote(set.key); }
    std::string operator()(const KvMultiSet& set) const {
      return "MULTI_SET of " + quote_keys(set.keys);
    }
    std::string operator()(const KvAdd& add) const { return "ADD " + quote(add.key); }
    std::string operator()(const KvCompareSet& swap) const {
      return "COMPARE_SET " + quote(swap.key);
    }
    std::string operator()(const KvAppend& append) const { return "APPEND " + quote(append.key); }
    std::string operator()(const KvWait& wait) const { return "WAIT for " + quote_keys(wait.keys); }
    std::string operator()(const KvBeat& beat) const { return "heartbeat ADD " + quote(beat.key); }
    std::string operator()(const KvProbe& probe) const {
      return "liveness probe ADD " + quote(probe.key);
    }
    std::string operator()(const KvTakeTicket& ticket) const {
      return "ticket ADD " + quote(ticket.key);
    }
    std::string operator()(const KvCountTickets& count) const {
      return "ticket count ADD " + quote(count.key);
    }
  };
  return std::visit(Describe{}, op);
}

std::string describe_address(const std::string& host, uint16_t port) {
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address(host, error);
  if (!error && address.is_v6()) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

// Options as given, or std::invalid_argument naming the one that cannot work.
StoreKvOptions validated(StoreKvOptions options) {
  const auto require = [](bool holds, const std::string& what) {
    if (!holds) {
      throw std::invalid_argument("store backend: " + what);
    }
  };
  require(!options.host.empty(), "no store host");
  require(options.port != 0, "no store port");
  require(options.op_timeout.count() > 0, "the operation timeout must be positive");
  require(options.connect_timeout.count() >= 0 && options.reconnect_timeout.count() >= 0,
          "connect timeouts cannot be negative");
  require(options.max_reply_bytes > 0, "max_reply_bytes must be positive");
  require(options.max_wait_connections > 0, "max_wait_connections must be positive");
  return options;
}

// Why the store cannot carry an op as given, if it cannot.
std::optional<std::string> rejection(const KvOp& op) {
  const auto too_many = [](std::size_t count) -> std::optional<std::string> {
    if (count > kMaxKeysPerRequest) {
      return std::to_string(count) + " keys in one request (TCPStore servers take at most " +
             std::to_string(kMaxKeysPerRequest) + ")";
    }
    return std::nullopt;
  };
  if (const auto* set = std::get_if<KvMultiSet>(&op)) {
    if (set->keys.size() != set->values.size()) {
      return std::to_string(set->keys.size()) + " keys but " + std::to_string(set->values.size()) +
             " values";
    }
    return too_many(set->keys.size());
  }
  if (const auto* get = std::get_if<KvMultiGet>(&op)) {
    return too_many(get->keys.size());
  }
  if (const auto* wait = std::get_if<KvWait>(&op)) {
    return too_many(wait->keys.size());
  }
  return std::nullopt;
}

// The answer of an op that needs no request at all.
std::optional<KvResult> trivial_answer(const KvOp& op) {
  if (const auto* get = std::get_if<KvMultiGet>(&op); get && get->keys.empty()) {
    return KvValues{};
  }
  if (const auto* set = std::get_if<KvMultiSet>(&op); set && set->keys.empty()) {
    return KvDone{};
  }
  if (const auto* wait = std::get_if<KvWait>(&op); wait && wait->keys.empty()) {
    return KvReady{true};
  }
  return std::nullopt;
}

// The counter an op adds to on the wire, and by how much: nullopt for ops that add nothing.
struct CounterAdd {
  std::string key;
  int64_t delta = 0;
};
std::optional<CounterAdd> counter_add(const KvOp& op) {
  using Add = std::optional<CounterAdd>;
  return std::visit(common::Overloaded{
                        [](const KvAdd& add) -> Add { return CounterAdd{add.key, add.delta}; },
                        [](const KvBeat& beat) -> Add { return CounterAdd{beat.key, 1}; },
                        [](const KvProbe& probe) -> Add { return CounterAdd{probe.key, 0}; },
                        [](const KvTakeTicket& ticket) -> Add { return CounterAdd{ticket.key, 1}; },
                        [](const KvCountTickets& count) -> Add { return CounterAdd{count.key, 0}; },
                        [](const auto&) -> Add { return std::nullopt; },
                    },
                    op);
}

// Why an ADD of delta to a key holding value makes a TCPStore server close the connection
// (PyTorch's std::stoll throws; ddprun's store does the same): nullopt when it would not.
std::optional<std::string> counter_trouble(const std::string& value, int64_t delta) {
  int64_t current = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), current);
  if (value.empty() || error != std::errc{} || end != value.data() + value.size()) {
    return "holds " + shown_value(value) + ", not a counter";
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return "the counter holds " + value + ": adding " + std::to_string(delta) +
           " overflows 64 bits";
  }
  return std::nullopt;
}

}  // namespace

// One op from start() to its completion.
struct PendingKvOp {
  uint64_t id = 0;
  KvOp op;
  KvBackend::Completion done;
  std::string what;  // for messages
  bool finished = false;
  // KvWait: its deadline, and the connection it holds while waiting.
  std::unique_ptr<boost::asio::steady_timer> wait_timer;
  ConnectionPtr wait_connection;
  // KvMultiGet: the keys on the wire, which of them exist, the values read so far, and how
  // many replies of the current step are still to come (also G0's KvMultiSet).
  std::vector<std::string> keys;
  std::vector<bool> present;
  std::vector<std::optional<std::string>> values;
  std::size_t remaining = 0;
  // G0's emulated KvAppend: compare-and-set attempts made.
  int append_attempts = 0;
};

class StoreKv::Core : public std::enable_shared_from_this<StoreKv::Core> {
 public:
  Core(boost::asio::io_context& io, StoreKvOptions options)
      : io_(io),
        options_(std::move(options)),
        where_(describe_address(options_.host, options_.port)),
        dialer_(io, StoreKvDialer::Settings{
                        options_.host, options_.port,
                        StoreKvConnection::Limits{options_.op_timeout, options_.max_reply_bytes},
                        options_.secret}) {}

  void start(uint64_t id, KvOp op, Completion done);
  void cancel(uint64_t id);
  void close(std::function<void()> done);
  void abandon();
  const std::string& where() const { return where_; }
  std::optional<store::WireGeneration> generation() const { return dialer_.generation(); }

 private:
  using OpPtr = std::shared_ptr<PendingKvOp>;

  // A new connection, handed to `then` unless the backend was abandoned meanwhile.
  using DialedHandler = void (Core::*)(ConnectionPtr, std::optional<Failure>);
  void dial(std::chrono::milliseconds budget, DialedHandler then);
  // Stops dialing and closes every connection (abandon, close).
  void close_connections();

  // The main connection.
  void queue_main(const OpPtr& op);
  void dial_main();
  void on_main_dialed(ConnectionPtr connection, std::optional<Failure> failure);
  void run(const OpPtr& op);
  void send(const OpPtr& op, std::string request, ReplyShape shape,
            std::function<void(Reply&)> on_reply, std::size_t count = 0);
  // A write without reply (SET, MULTI_SET, APPEND): the op is done once it is confirmed.
  void send_write(const OpPtr& op, std::string request);

  // Each op on the main connection.
  void read_value(const OpPtr& op, const std::string& key,
                  std::function<void(std::optional<std::string>)> then);
  void run_multi_get(const OpPtr& op);
  void fetch_present_values(const OpPtr& op);
  void run_multi_set(const OpPtr& op, const KvMultiSet& set);
  void run_compare_set(const OpPtr& op, const KvCompareSet& swap);
  void run_append(const OpPtr& op, const KvAppend& append);
  void append_by_compare_set(const OpPtr& op, const std::optional<std::string>& current);

  // Waits, each on a connection of its own.
  void start_wait(const OpPtr& op);
  void serve_waits();
  void dial_wait_connection();
  void on_wait_dialed(ConnectionPtr connection, std::optional<Failure> failure);
  void begin_wait(const OpPtr& op, const ConnectionPtr& connection);
  void stop_wait(const OpPtr& op);
  void release_wait_connection(const ConnectionPtr& connection);
  void forget_wait_connection(const Connection* connection);

  // Completion.
  void finish(const OpPtr& op, KvResult result);
  void fail(const OpPtr& op, KvErrorKind kind, const std::string& reason);
  void finish_later(const OpPtr& op, KvResult result);
  void on_dial_failed(const Failure& failure, std::deque<OpPtr>& queue);
  // A TCPStore server closes the connection of an ADD to a key that holds no integer, and so
  // fails every op in flight on it: that is junk in the store, not a lost store. Failures of
  // the main connection are held for one turn of the loop; when ops that add to counters were
  // among them, the counters are read on a fresh connection, and if one is junk every held op
  // fails with kCorrupt naming it. Otherwise, or when no connection can be made, they fail as
  // they did.
  void failed_on_main(const OpPtr& op, const Failure& failure);
  void diagnose_held_failures();
  void judge_held_failures(const std::vector<std::pair<OpPtr, Failure>>& held,
                           const std::vector<CounterAdd>& counters, const KvResult& read);
  void give_up(const std::string& reason);
  void maybe_closed();

  // How long ops may wait for a connection now.
  std::chrono::milliseconds connect_budget() const {
    return ever_connected_ ? options_.reconnect_timeout : options_.connect_timeout;
  }
  // A wait's connection while the main one is open is not a reconnect: the store is up, only
  // slow to accept (thousands of agents connecting at once), so it gets an op's time.
  std::chrono::milliseconds wait_connect_budget() const {
    const bool store_up = main_ && main_->is_open();
    return store_up ? std::max(connect_budget(), options_.op_timeout) : connect_budget();
  }
  StoreKvRequests requests() const {
    return StoreKvRequests(dialer_.generation().value_or(store::WireGeneration::g2));
  }
  std::string on_wire(const std::string& key) const { return options_.key_prefix + key; }
  std::vector<std::string> on_wire(const std::vector<std::string>& keys) const;

  boost::asio::io_context& io_;
  StoreKvOptions options_;
  std::string where_;
  StoreKvDialer dialer_;
  std::unordered_map<uint64_t, OpPtr> ops_;  // started, not finished or cancelled
  bool ever_connected_ = false;
  std::optional<std::string> gone_;  // why the store was given up for good

  ConnectionPtr main_;
  bool main_dialing_ = false;
  // Ops that failed with the main connection in this turn of the loop (failed_on_main).
  std::optional<std::vector<std::pair<OpPtr, Failure>>> held_failures_;
  std::deque<OpPtr> main_queue_;  // waiting for the main connection

  std::deque<OpPtr> wait_queue_;              // waits waiting for a connection
  std::set<ConnectionPtr> wait_connections_;  // busy, cancelling or idle
  std::vector<ConnectionPtr> idle_wait_connections_;
  std::size_t wait_dials_ = 0;
  std::size_t cancelling_ = 0;  // wait connections with a CANCEL_WAIT in flight

  bool closing_ = false;
  bool closed_ = false;
  bool abandoned_ = false;
  std::function<void()> on_closed_;
};

std::vector<std::string> StoreKv::Core::on_wire(const std::vector<std::string>& keys) const {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& key : keys) {
    prefixed.push_back(on_wire(key));
  }
  return prefixed;
}

void StoreKv::Core::start(uint64_t id, KvOp op, Completion done) {
  if (abandoned_) {
    return;
  }
  auto pending = std::make_shared<PendingKvOp>();
  pending->id = id;
  pending->op = std::move(op);
  pending->done = std::move(done);
  pending->what = describe_op(pending->op);
  if (!ops_.emplace(id, pending).second) {
    finish_later(pending, KvError{KvErrorKind::kRejected,
                                  "op id " + std::to_string(id) + " is already pending"});
    return;
  }
  if (closed_ || closing_) {
    fail(pending, KvErrorKind::kUnreachable, "the backend was closed");
    return;
  }
  if (gone_) {
    fail(pending, KvErrorKind::kUnreachable, *gone_);
    return;
  }
  if (const auto reason = rejection(pending->op)) {
    fail(pending, KvErrorKind::kRejected, *reason);
    return;
  }
  if (auto answer = trivial_answer(pending->op)) {
    finish_later(pending, std::move(*answer));
    return;
  }
  if (const auto* wait = std::get_if<KvWait>(&pending->op); wait && wait->timeout.count() > 0) {
    start_wait(pending);
    return;
  }
  queue_main(pending);
}

void StoreKv::Core::cancel(uint64_t id) {
  const auto found = ops_.find(id);
  if (found == ops_.end()) {
    return;
  }
  const OpPtr op = found->second;
  ops_.erase(found);
  op->finished = true;
  op->done = nullptr;
  if (std::holds_alternative<KvWait>(op->op)) {
    stop_wait(op);
  }
  maybe_closed();
}

void StoreKv::Core::close(std::function<void()> done) {
  if (abandoned_ || closing_) {
    return;
  }
  closing_ = true;
  on_closed_ = std::move(done);
  maybe_closed();
}

void StoreKv::Core::abandon() {
  abandoned_ = true;
  closing_ = true;
  close_connections();
  for (const auto& [id, op] : ops_) {
    op->finished = true;
    if (op->wait_timer) {
      op->wait_timer->cancel();
    }
    op->wait_connection.reset();
  }
  ops_.clear();
  main_queue_.clear();
  wait_queue_.clear();
  on_closed_ = nullptr;
}

// ---- the main connection ----

void StoreKv::Core::queue_main(const OpPtr& op) {
  if (main_ && main_->is_open()) {
    run(op);
    return;
  }
  main_queue_.push_back(op);
  dial_main();
}

void StoreKv::Core::dial_main() {
  if (main_dialing_) {
    return;
  }
  main_dialing_ = true;
  dial(connect_budget(), &Core::on_main_dialed);
}

void StoreKv::Core::dial(std::chrono::milliseconds budget, DialedHandler then) {
  dialer_.dial(budget, [weak = weak_from_this(), then](ConnectionPtr connection,
                                                       std::optional<Failure> failure) {
    const auto self = weak.lock();
    if (!self || self->abandoned_) {
      // Abandoned while dialing: nobody will use the connection.
      if (connection) {
        connection->close();
      }
      return;
    }
    ((*self).*then)(std::move(connection), std::move(failure));
  });
}

void StoreKv::Core::on_main_dialed(ConnectionPtr connection, std::optional<Failure> failure) {
  main_dialing_ = false;
  if (failure) {
    on_dial_failed(*failure, main_queue_);
    return;
  }
  ever_connected_ = true;
  main_ = std::move(connection);
  main_->on_failure([weak = weak_from_this(), raw = main_.get()](const Failure& broke) {
    // Dropped; the ops in flight hear of it themselves, the next op dials anew.
    const auto self = weak.lock();
    if (self && self->main_.get() == raw) {
      self->main_.reset();
    }
    if (self && broke.kind == KvErrorKind::kUnreachable && !self->held_failures_) {
      self->held_failures_.emplace();
      boost::asio::post(self->io_, [weak] {
        const auto alive = weak.lock();
        if (alive && !alive->abandoned_) {
          alive->diagnose_held_failures();
        }
      });
    }
  });
  auto queued = std::move(main_queue_);
  main_queue_.clear();
  for (const auto& op : queued) {
    if (!op->finished) {
      run(op);
    }
  }
  maybe_closed();
}

void StoreKv::Core::send(const OpPtr& op, std::string request, ReplyShape shape,
                         std::function<void(Reply&)> on_reply, std::size_t count) {
  if (!main_ || !main_->is_open()) {
    // Only reachable between two steps of an op, which run in the same turn as the reply
    // that led to the second; kept as a guard.
    fail(op, KvErrorKind::kUnreachable, "the connection broke");
    return;
  }
  main_->send(
      std::move(request), shape, op->what,
      [weak = weak_from_this(), op, on_reply = std::move(on_reply)](Outcome& outcome) {
        const auto self = weak.lock();
        if (!self || self->abandoned_ || op->finished) {
          return;
        }
        if (const auto* failure = std::get_if<Failure>(&outcome)) {
          self->failed_on_main(op, *failure);
          return;
        }
        on_reply(std::get<Reply>(outcome));
      },
      count);
}

void StoreKv::Core::run(const OpPtr& op) {
  const StoreKvRequests request = requests();
  if (const auto* get = std::get_if<KvGet>(&op->op)) {
    read_value(op, on_wire(get->key), [this, op](std::optional<std::string> value) {
      finish(op, KvValue{std::move(value)});
    });
  } else if (std::holds_alternative<KvMultiGet>(op->op)) {
    run_multi_get(op);
  } else if (const auto* set = std::get_if<KvSet>(&op->op)) {
    send_write(op, request.set(on_wire(set->key), set->value));
  } else if (const auto* multi_set = std::get_if<KvMultiSet>(&op->op)) {
    run_multi_set(op, *multi_set);
  } else if (const auto* add = std::get_if<KvAdd>(&op->op)) {
    send(op, request.add(on_wire(add->key), add->delta), ReplyShape::integer,
         [this, op](Reply& reply) { finish(op, KvCounter{reply.integer}); });
  } else if (const auto* swap = std::get_if<KvCompareSet>(&op->op)) {
    run_compare_set(op, *swap);
  } else if (const auto* append = std::get_if<KvAppend>(&op->op)) {
    run_append(op, *append);
  } else if (const auto* wait = std::get_if<KvWait>(&op->op)) {
    // A wait whose time is already up: do the keys exist now?
    send(op, request.check(on_wire(wait->keys)), ReplyShape::check,
         [this, op](Reply& reply) { finish(op, KvReady{reply.ready}); });
  } else if (const auto* beat = std::get_if<KvBeat>(&op->op)) {
    send(op, request.add(on_wire(beat->key), 1), ReplyShape::integer,
         [this, op](Reply&) { finish(op, KvDone{}); });
  } else if (const auto* probe = std::get_if<KvProbe>(&op->op)) {
    send(op, request.add(on_wire(probe->key), 0), ReplyShape::integer,
         [this, op](Reply& reply) { finish(op, KvLiveness{reply.integer, false}); });
  } else if (const auto* ticket = std::get_if<KvTakeTicket>(&op->op)) {
    // ADD is one atomic step on the server: no race to lose.
    send(op, request.add(on_wire(ticket->key), 1), ReplyShape::integer,
         [this, op](Reply& reply) { finish(op, KvCounter{reply.integer}); });
  } else if (const auto* count = std::get_if<KvCountTickets>(&op->op)) {
    send(op, request.add(on_wire(count->key), 0), ReplyShape::integer,
         [this, op](Reply& reply) { finish(op, KvCounter{reply.integer}); });
  }
}

void StoreKv::Core::read_value(const OpPtr& op, const std::string& key,
                               std::function<void(std::optional<std::string>)> then) {
  // CHECK first: a GET of a missing key makes PyTorch's legacy server drop the connection.
  send(op, requests().check({key}), ReplyShape::check,
       [this, op, key, then = std::move(then)](Reply& reply) {
         if (!reply.ready) {
           then(std::nullopt);
           return;
         }
         send(op, requests().get(key), ReplyShape::value,
              [then](Reply& value) { then(std::move(value.value)); });
       });
}

void StoreKv::Core::run_multi_get(const OpPtr& op) {
  op->keys = on_wire(std::get<KvMultiGet>(op->op).keys);
  op->present.assign(op->keys.size(), true);
  op->values.assign(op->keys.size(), std::nullopt);
  send(op, requests().check(op->keys), ReplyShape::check, [this, op](Reply& all) {
    if (all.ready) {
      fetch_present_values(op);
      return;
    }
    // Some keys are missing: learn which, one CHECK per key, all in flight at once.
    op->remaining = op->keys.size();
    for (std::size_t i = 0; i < op->keys.size(); ++i) {
      send(op, requests().check({op->keys[i]}), ReplyShape::check, [this, op, i](Reply& one) {
        op->present[i] = one.ready;
        if (--op->remaining == 0) {
          fetch_present_values(op);
        }
      });
    }
  });
}

void StoreKv::Core::fetch_present_values(const OpPtr& op) {
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < op->keys.size(); ++i) {
    if (op->present[i]) {
      indices.push_back(i);
    }
  }
  if (indices.empty()) {
    finish(op, KvValues{std::move(op->values)});
    return;
  }
  const StoreKvRequests request = requests();
  if (request.has_batch_commands()) {
    std::vector<std::string> keys;
    keys.reserve(indices.size());
    for (const auto i : indices) {
      keys.push_back(op->keys[i]);
    }
    const std::size_t count = keys.size();
    send(
        op, request.multi_get(keys), ReplyShape::values,
        [this, op, indices](Reply& reply) {
          for (std::size_t j = 0; j < indices.size(); ++j) {
            op->values[indices[j]] = std::move(reply.values[j]);
          }
          finish(op, KvValues{std::move(op->values)});
        },
        count);
    return;
  }
  op->remaining = indices.size();
  for (const auto i : indices) {
    send(op, request.get(op->keys[i]), ReplyShape::value, [this, op, i](Reply& reply) {
      op->values[i] = std::move(reply.value);
      if (--op->remaining == 0) {
        finish(op, KvValues{std::move(op->values)});
      }
    });
  }
}

void StoreKv::Core::send_write(const OpPtr& op, std::string request) {
  send(op, std::move(request), ReplyShape::none, [this, op](Reply&) { finish(op, KvDone{}); });
}

void StoreKv::Core::run_multi_set(const OpPtr& op, const KvMultiSet& set) {
  const StoreKvRequests request = requests();
  if (request.has_batch_commands()) {
    send_write(op, request.multi_set(on_wire(set.keys), set.values));
    return;
  }
  op->remaining = set.keys.size();
  for (std::size_t i = 0; i < set.keys.size(); ++i) {
    send(op, request.set(on_wire(set.keys[i]), set.values[i]), ReplyShape::none,
         [this, op](Reply&) {
           if (--op->remaining == 0) {
             finish(op, KvDone{});
           }
         });
  }
}

void StoreKv::Core::run_compare_set(const OpPtr& op, const KvCompareSet& swap) {
  const std::string key = on_wire(swap.key);
  if (swap.expected && !swap.expected->empty() && *swap.expected == swap.desired) {
    // Swapping a value for itself changes nothing: this is a read.
    read_value(op, key, [this, op](std::optional<std::string> value) {
      finish(op, KvValue{std::move(value)});
    });
    return;
  }
  send(op, requests().compare_set(key, swap.expected.value_or(""), swap.desired), ReplyShape::value,
       [this, op](Reply& reply) {
         const auto& expected = std::get<KvCompareSet>(op->op).expected;
         // Had the key held `expected`, the swap would have happened and the answer would be
         // `desired` (which differs here): TCPStore answers `expected` for an absent key.
         if (expected && !expected->empty() && reply.value == *expected) {
           finish(op, KvValue{std::nullopt});
           return;
         }
         finish(op, KvValue{std::move(reply.value)});
       });
}

void StoreKv::Core::run_append(const OpPtr& op, const KvAppend& append) {
  const StoreKvRequests request = requests();
  if (request.has_batch_commands()) {
    send_write(op, request.append(on_wire(append.key), append.value));
    return;
  }
  read_value(op, on_wire(append.key), [this, op](std::optional<std::string> current) {
    append_by_compare_set(op, current);
  });
}

void StoreKv::Core::append_by_compare_set(const OpPtr& op,
                                          const std::optional<std::string>& current) {
  const auto& append = std::get<KvAppend>(op->op);
  if (++op->append_attempts > kMaxAppendAttempts) {
    fail(op, KvErrorKind::kRejected,
         "other writers changed the value " + std::to_string(kMaxAppendAttempts) +
             " times while it was being appended to (G0 has no APPEND)");
    return;
  }
  const std::string expected = current.value_or("");
  std::string desired = expected + append.value;
  send(op, requests().compare_set(on_wire(append.key), expected, desired), ReplyShape::value,
       [this, op, expected, desired](Reply& reply) {
         if (reply.value == desired) {
           finish(op, KvDone{});
           return;
         }
         // Another writer changed it first; an answer equal to a non-empty `expected` means
         // the key is absent (see run_compare_set).
         const bool absent = !expected.empty() && reply.value == expected;
         append_by_compare_set(op, absent ? std::nullopt : std::optional(reply.value));
       });
}

// ---- waits ----

void StoreKv::Core::start_wait(const OpPtr& op) {
  op->wait_timer =
      std::make_unique<boost::asio::steady_timer>(io_, std::get<KvWait>(op->op).timeout);
  op->wait_timer->async_wait([weak = weak_from_this(), op](const boost::system::error_code& error) {
    const auto self = weak.lock();
    if (error || !self || self->abandoned_ || op->finished) {
      return;
    }
    self->stop_wait(op);
    self->finish(op, KvReady{false});
  });
  wait_queue_.push_back(op);
  serve_waits();
}

void StoreKv::Core::serve_waits() {
  std::erase_if(wait_queue_, [](const OpPtr& op) { return op->finished; });
  while (!wait_queue_.empty() && !idle_wait_connections_.empty()) {
    const OpPtr op = wait_queue_.front();
    wait_queue_.pop_front();
    const ConnectionPtr connection = idle_wait_connections_.back();
    idle_wait_connections_.pop_back();
    begin_wait(op, connection);
  }
  if (gone_) {
    return;
  }
  // A connection whose wait is being cancelled is free again within a round trip, sooner
  // than a new one could be made: count it as on its way.
  while (wait_dials_ + cancelling_ < wait_queue_.size() &&
         wait_connections_.size() + wait_dials_ < options_.max_wait_connections) {
    dial_wait_connection();
  }
}

void StoreKv::Core::dial_wait_connection() {
  ++wait_dials_;
  dial(wait_connect_budget(), &Core::on_wait_dialed);
}

void StoreKv::Core::on_wait_dialed(ConnectionPtr connection, std::optional<Failure> failure) {
  --wait_dials_;
  if (failure) {
    std::erase_if(wait_queue_, [](const OpPtr& op) { return op->finished; });
    on_dial_failed(*failure, wait_queue_);
    return;
  }
  ever_connected_ = true;
  wait_connections_.insert(connection);
  connection->on_failure([weak = weak_from_this(), raw = connection.get()](const Failure&) {
    if (const auto self = weak.lock()) {
      self->forget_wait_connection(raw);
    }
  });
  release_wait_connection(connection);
}

void StoreKv::Core::begin_wait(const OpPtr& op, const ConnectionPtr& connection) {
  op->wait_connection = connection;
  connection->send(requests().wait(on_wire(std::get<KvWait>(op->op).keys)), ReplyShape::wait,
                   op->what,
                   [weak = weak_from_this(), op,
                    weak_connection = std::weak_ptr<Connection>(connection)](Outcome& outcome) {
                     const auto self = weak.lock();
                     if (!self || self->abandoned_ || op->finished) {
                       return;
                     }
                     op->wait_connection.reset();
                     if (const auto* failure = std::get_if<Failure>(&outcome)) {
                       self->fail(op, failure->kind, failure->reason);
                       return;
                     }
                     if (const auto held = weak_connection.lock()) {
                       self->release_wait_connection(held);
                     }
                     self->finish(op, KvReady{true});
                   });
}

void StoreKv::Core::stop_wait(const OpPtr& op) {
  if (op->wait_timer) {
    op->wait_timer->cancel();
  }
  const ConnectionPtr connection = std::move(op->wait_connection);
  op->wait_connection.reset();
  if (!connection) {
    return;  // still queued for a connection: serve_waits() drops it
  }
  if (connection->is_open() && requests().has_batch_commands()) {
    ++cancelling_;
    connection->cancel_wait(
        requests().cancel_wait(),
        [weak = weak_from_this(),
         weak_connection = std::weak_ptr<Connection>(connection)](Outcome& outcome) {
          const auto self = weak.lock();
          if (!self || self->abandoned_) {
            return;
          }
          --self->cancelling_;
          const auto cancelled = weak_connection.lock();
          if (cancelled && std::holds_alternative<Reply>(outcome)) {
            self->release_wait_connection(cancelled);
          } else {
            self->serve_waits();  // the connection is gone: a queued wait may need a new one
          }
        });
    return;
  }
  // G0 cannot cancel a WAIT: only closing the connection drops the server's registration.
  connection->close();
  forget_wait_connection(connection.get());
}

void StoreKv::Core::release_wait_connection(const ConnectionPtr& connection) {
  if (!connection->is_open()) {
    forget_wait_connection(connection.get());
    return;
  }
  std::erase_if(wait_queue_, [](const OpPtr& op) { return op->finished; });
  if (!wait_queue_.empty()) {
    const OpPtr op = wait_queue_.front();
    wait_queue_.pop_front();
    begin_wait(op, connection);
    return;
  }
  if (!closing_ && idle_wait_connections_.size() < options_.idle_wait_connections) {
    idle_wait_connections_.push_back(connection);
    return;
  }
  connection->close();
  wait_connections_.erase(connection);
  maybe_closed();
}

void StoreKv::Core::forget_wait_connection(const Connection* connection) {
  std::erase_if(idle_wait_connections_,
                [connection](const ConnectionPtr& idle) { return idle.get() == connection; });
  std::erase_if(wait_connections_,
                [connection](const ConnectionPtr& known) { return known.get() == connection; });
  serve_waits();  // a connection's place became free
}

// ---- completion ----

void StoreKv::Core::finish(const OpPtr& op, KvResult result) {
  if (op->finished) {
    return;
  }
  op->finished = true;
  if (op->wait_timer) {
    op->wait_timer->cancel();
  }
  if (const auto found = ops_.find(op->id); found != ops_.end() && found->second == op) {
    ops_.erase(found);
  }
  auto done = std::move(op->done);
  op->done = nullptr;
  if (done) {
    done(std::move(result));
  }
  maybe_closed();
}

void StoreKv::Core::fail(const OpPtr& op, KvErrorKind kind, const std::string& reason) {
  const KvError error{kind, "store " + where_ + ": " + op->what + ": " + reason};
  if (op->finished) {
    return;
  }
  // Never inside start(): every caller but start() runs in a handler, and start() posts.
  finish_later(op, error);
}

void StoreKv::Core::finish_later(const OpPtr& op, KvResult result) {
  boost::asio::post(io_, [weak = weak_from_this(), op, result = std::move(result)]() mutable {
    const auto self = weak.lock();
    if (self && !self->abandoned_) {
      self->finish(op, std::move(result));
    }
  });
}

void StoreKv::Core::on_dial_failed(const Failure& failure, std::deque<OpPtr>& queue) {
  if (failure.kind == KvErrorKind::kUnreachable) {
    give_up(failure.reason);
    return;
  }
  // Reached but not answering, or answering wrongly: these ops fail; later ones try again.
  auto failed = std::move(queue);
  queue.clear();
  for (const auto& op : failed) {
    fail(op, failure.kind, failure.reason);
  }
}

void StoreKv::Core::failed_on_main(const OpPtr& op, const Failure& failure) {
  if (held_failures_ && failure.kind == KvErrorKind::kUnreachable) {
    held_failures_->emplace_back(op, failure);
    return;
  }
  fail(op, failure.kind, failure.reason);
}

void StoreKv::Core::diagnose_held_failures() {
  auto held = std::move(held_failures_).value_or(std::vector<std::pair<OpPtr, Failure>>{});
  held_failures_.reset();
  std::vector<CounterAdd> counters;
  for (const auto& [op, failure] : held) {
    if (auto add = counter_add(op->op); add && !op->finished) {
      counters.push_back(std::move(*add));
    }
  }
  if (counters.empty() || gone_ || closed_) {
    judge_held_failures(held, {}, KvValues{});
    return;
  }
  // An op of the backend's own, outside ops_: the held ops keep a close() waiting meanwhile.
  auto read = std::make_shared<PendingKvOp>();
  std::vector<std::string> keys;
  for (const auto& counter : counters) {
    keys.push_back(counter.key);
  }
  read->op = KvMultiGet{std::move(keys)};
  read->what = "reading the counters of ADDs whose connection the server closed";
  read->done = [weak = weak_from_this(), held, counters](KvResult result) {
    if (const auto self = weak.lock(); self && !self->abandoned_) {
      self->judge_held_failures(held, counters, result);
    }
  };
  queue_main(read);
}

void StoreKv::Core::judge_held_failures(const std::vector<std::pair<OpPtr, Failure>>& held,
                                        const std::vector<CounterAdd>& counters,
                                        const KvResult& read) {
  std::optional<std::string> corrupt;
  if (const auto* values = std::get_if<KvValues>(&read)) {
    for (std::size_t i = 0; i < counters.size() && i < values->values.size() && !corrupt; ++i) {
      if (const auto& value = values->values[i]) {
        if (auto trouble = counter_trouble(*value, counters[i].delta)) {
          corrupt = corrupt_key_text(counters[i].key, *trouble);
        }
      }
    }
  }
  for (const auto& [op, failure] : held) {
    if (corrupt) {
      finish_later(op, KvError{KvErrorKind::kCorrupt, *corrupt});
    } else {
      fail(op, failure.kind, failure.reason);
    }
  }
}

void StoreKv::Core::give_up(const std::string& reason) {
  gone_ = reason;
  auto main_queue = std::move(main_queue_);
  main_queue_.clear();
  auto wait_queue = std::move(wait_queue_);
  wait_queue_.clear();
  for (const auto& op : main_queue) {
    fail(op, KvErrorKind::kUnreachable, reason);
  }
  for (const auto& op : wait_queue) {
    fail(op, KvErrorKind::kUnreachable, reason);
  }
}

void StoreKv::Core::close_connections() {
  dialer_.abandon();
  if (main_) {
    main_->close();
    main_.reset();
  }
  for (const auto& connection : wait_connections_) {
    connection->close();
  }
  wait_connections_.clear();
  idle_wait_connections_.clear();
}

void StoreKv::Core::maybe_closed() {
  if (!closing_ || closed_ || abandoned_ || !ops_.empty()) {
    return;
  }
  closed_ = true;
  close_connections();
  if (auto done = std::move(on_closed_)) {
    boost::asio::post(io_, std::move(done));
  }
}

// ---- StoreKv ----

StoreKv::StoreKv(boost::asio::io_context& io, StoreKvOptions options)
    : core_(std::make_shared<Core>(io, validated(std::move(options)))) {}

StoreKv::~StoreKv() {
  core_->abandon();
}

void StoreKv::start(uint64_t id, round::KvOp op, Completion done) {
  core_->start(id, std::move(op), std::move(done));
}

void StoreKv::cancel(uint64_t id) {
  core_->cancel(id);
}

void StoreKv::close(std::function<void()> done) {
  core_->close(std::move(done));
}

std::string StoreKv::describe() const {
  return core_->where();
}

std::optional<store::WireGeneration> StoreKv::generation() const {
  return core_->generation();
}

}  // namespace ddprun::rendezvous::backends
