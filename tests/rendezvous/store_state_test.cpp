// TCPStore semantics on the state alone (no sockets): who is answered what, and when.

#include "rendezvous/store/store_state.hpp"

#include <catch2/catch.hpp>

#include "raw_connection.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;

namespace {

Request request(Command command, std::vector<std::string> keys = {},
                std::vector<std::string> values = {}, std::int64_t integer = 0) {
  Request r;
  r.command = command;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.integer = integer;
  return r;
}

struct Harness {
  MemoryBudget budget{1 << 20};
  StoreState state{budget};
  std::vector<OutgoingMessage> out;

  std::optional<std::string> apply(ConnectionId from, Request r) {
    out.clear();
    return state.handle(from, r, out);
  }
  // The bytes sent to one connection by the last request.
  std::string sent_to(ConnectionId id) const {
    std::string bytes;
    for (const auto& message : out) {
      if (message.to == id) {
        bytes += message.bytes;
      }
    }
    return bytes;
  }
};

}  // namespace

TEST_CASE("WAIT counts registrations: duplicates, partial sets, several keys", "[unit]") {
  Harness h;
  h.apply(1, request(Command::wait, {"a", "a", "b"}));
  CHECK(h.out.empty());
  h.apply(2, request(Command::set, {"a"}, {"1"}));
  CHECK(h.sent_to(1).empty());
  h.apply(2, request(Command::add, {"b"}, {}, 3));
  CHECK(h.sent_to(1) == hex("00"));
  CHECK(h.sent_to(2) == hex("03 00 00 00 00 00 00 00"));
  CHECK(h.state.pending_waits() == 0);
  h.apply(1, request(Command::wait, {"a", "b"}));
  CHECK(h.sent_to(1) == hex("00"));  // all present: at once
}

TEST_CASE("which operations wake waiters", "[unit]") {
  Harness h;
  const auto woken_by = [&](Request r) {
    h.apply(1, request(Command::wait, {"k"}));
    h.apply(2, std::move(r));
    const bool woken = h.sent_to(1) == hex("00");
    h.apply(1, request(Command::cancel_wait));
    h.apply(2, request(Command::delete_key, {"k"}));
    return woken;
  };
  CHECK(woken_by(request(Command::set, {"k"}, {"v"})));
  CHECK(woken_by(request(Command::add, {"k"}, {}, 1)));
  CHECK(woken_by(request(Command::append, {"k"}, {"v"})));
  CHECK(woken_by(request(Command::multi_set, {"x", "k"}, {"1", "2"})));
  CHECK(woken_by(request(Command::compare_set, {"k"}, {"", "v"})));         // creates: wakes
  CHECK_FALSE(woken_by(request(Command::compare_set, {"k"}, {"e", "v"})));  // stays absent
  CHECK_FALSE(woken_by(request(Command::delete_key, {"k"})));
  CHECK_FALSE(woken_by(request(Command::get, {"k"})));
}

TEST_CASE("CANCEL_WAIT answers WAIT_CANCELED and leaves nothing registered", "[unit]") {
  Harness h;
  const auto before = h.budget.used();
  h.apply(1, request(Command::wait, {"x", "y"}));
  CHECK(h.budget.used() > before);
  h.apply(1, request(Command::cancel_wait));
  CHECK(h.sent_to(1) == hex("01"));
  CHECK(h.budget.used() == before);
  h.apply(2, request(Command::set, {"x"}, {"1"}));
  h.apply(2, request(Command::set, {"y"}, {"1"}));
  CHECK(h.sent_to(1).empty());
}

TEST_CASE("a disconnect drops the connection's waits and watches", "[unit]") {
  Harness h;
  h.apply(1, request(Command::wait, {"x"}));
  h.apply(1, request(Command::watch_key, {"x"}));
  h.state.disconnect(1);
  h.apply(2, request(Command::set, {"x"}, {"1"}));
  CHECK(h.out.empty());
  CHECK(h.state.pending_waits() == 0);
}

TEST_CASE("ADD keeps ASCII counters and refuses non-numbers and overflow", "[unit]") {
  Harness h;
  h.apply(1, request(Command::add, {"c"}, {}, 41));
  h.apply(1, request(Command::add, {"c"}, {}, 1));
  CHECK(h.sent_to(1) == hex("2a 00 00 00 00 00 00 00"));
  h.apply(1, request(Command::get, {"c"}));
  CHECK(h.sent_to(1) == hex("02 00 00 00 00 00 00 00 34 32"));
  h.apply(1, request(Command::set, {"t"}, {"abc"}));
  CHECK(h.apply(1, request(Command::add, {"t"}, {}, 1)).has_value());
  h.apply(1, request(Command::set, {"m"}, {"9223372036854775807"}));
  CHECK(h.apply(1, request(Command::add, {"m"}, {}, 1)).has_value());
  h.apply(1, request(Command::get, {"m"}));
  CHECK(h.sent_to(1).substr(8) == "9223372036854775807");  // unchanged by the failed ADD
}

TEST_CASE("GET and MULTI_GET of a missing key answer empty values", "[unit]") {
  Harness h;
  h.apply(1, request(Command::get, {"none"}));
  CHECK(h.sent_to(1) == hex("00 00 00 00 00 00 00 00"));
  h.apply(1, request(Command::set, {"a"}, {"1"}));
  h.apply(1, request(Command::multi_get, {"none", "a"}));
  CHECK(h.sent_to(1) == hex("00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 31"));
}

TEST_CASE("queues: FIFO, one waiter woken per push, CHECK sees a non-empty queue", "[unit]") {
  Harness h;
  h.apply(1, request(Command::wait, {"q"}));
  h.apply(2, request(Command::wait, {"q"}));
  h.apply(3, request(Command::queue_push, {"q"}, {"a"}));
  CHECK(h.out.size() == 1);
  h.apply(3, request(Command::check, {"q"}));
  CHECK(h.sent_to(3) == hex("00"));
  h.apply(3, request(Command::queue_len, {"q"}));
  CHECK(h.sent_to(3) == hex("01 00 00 00 00 00 00 00"));
  h.apply(3, request(Command::get_num_keys));
  CHECK(h.sent_to(3) == hex("00 00 00 00 00 00 00 00"));  // queues are not keys
}

TEST_CASE("BARRIER releases everyone when the last arrives", "[unit]") {
  Harness h;
  h.apply(1, request(Command::barrier, {"b"}, {}, 3));
  h.apply(2, request(Command::barrier, {"b"}, {}, 3));
  CHECK(h.out.empty());
  h.apply(3, request(Command::barrier, {"b"}, {}, 3));
  CHECK(h.sent_to(1) == hex("00"));
  CHECK(h.sent_to(2) == hex("00"));
  CHECK(h.sent_to(3) == hex("00"));
}

TEST_CASE("the memory budget refuses what does not fit and state stays unchanged", "[unit]") {
  MemoryBudget budget(4096);
  StoreState state(budget);
  std::vector<OutgoingMessage> out;
  auto big = request(Command::set, {"k"}, {std::string(5000, 'x')});
  CHECK(state.handle(1, big, out).has_value());
  CHECK(state.num_keys() == 0);
  auto many =
      request(Command::multi_set, {"a", "b"}, {std::string(2000, 'x'), std::string(2000, 'y')});
  CHECK(state.handle(1, many, out).has_value());
  CHECK(state.num_keys() == 0);
  auto fits = request(Command::set, {"k"}, {"v"});
  CHECK_FALSE(state.handle(1, fits, out).has_value());
  CHECK(budget.used() > 0);
  auto remove = request(Command::delete_key, {"k"});
  state.handle(1, remove, out);
  CHECK(budget.used() == 0);
}
