// LibTorch's own c10d::TCPStore (1.13, G0) as a client of our server: every operation it
// offers, including watchKey over its callback connection.

#include <condition_variable>
#include <mutex>

// clang-format off
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// LibTorch brings glog, whose CHECK macros would replace Catch's: Catch comes after.
#undef CHECK
#undef CHECK_FALSE
#include <catch2/catch.hpp>
// clang-format on

#include "rendezvous/store/store_server.hpp"

using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

std::unique_ptr<ddprun::rendezvous::store::StoreServer> start_server() {
  ddprun::rendezvous::store::StoreServerOptions options;
  options.host = "127.0.0.1";
  return ddprun::rendezvous::store::StoreServer::start(options);
}

c10d::TCPStoreOptions client_options(uint16_t port) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = false;
  options.numWorkers = 1;  // sends ADD init/ 1, as every rank does
  options.waitWorkers = false;
  options.timeout = 10s;
  return options;
}

}  // namespace

TEST_CASE("c10d::TCPStore client: every operation", "[interop]") {
  const auto server = start_server();
  c10d::TCPStore store("127.0.0.1", client_options(server->port()));

  store.set("k1", bytes("v1"));
  CHECK(store.get("k1") == bytes("v1"));
  CHECK(store.add("cnt", 5) == 5);
  CHECK(store.add("cnt", -2) == 3);
  CHECK(store.get("cnt") == bytes("3"));
  CHECK(store.compareSet("cs", {}, bytes("X")) == bytes("X"));
  CHECK(store.compareSet("cs2", bytes("Y"), bytes("Z")) == bytes("Y"));
  CHECK(store.compareSet("k1", bytes("v1"), bytes("v2")) == bytes("v2"));
  CHECK(store.compareSet("k1", bytes("bad"), bytes("v3")) == bytes("v2"));
  CHECK(store.check({"k1", "cnt"}));
  CHECK_FALSE(store.check({"k1", "absent"}));
  store.wait({"k1", "cnt"});
  store.wait({"k1"}, 1s);
  // /k1, /cnt, /cs (waitWorkers=false: no init/ key)
  CHECK(store.getNumKeys() == 3);
  CHECK(store.deleteKey("k1"));
  CHECK_FALSE(store.deleteKey("k1"));
  CHECK(store.getNumKeys() == 2);
  const std::vector<uint8_t> binary{0, 1, 0, 255, 0};
  store.set("bin", binary);
  CHECK(store.get("bin") == binary);
  const std::vector<uint8_t> big(1 << 20, 0x5a);
  store.set("big", big);
  CHECK(store.get("big") == big);

  // Timed-out wait last: a 1.13 client is out of step afterwards (protocol notes §4.6).
  CHECK_THROWS(store.wait({"never"}, 300ms));
}

TEST_CASE("c10d::TCPStore client: watchKey sees created, updated and deleted", "[interop]") {
  const auto server = start_server();
  c10d::TCPStore watcher("127.0.0.1", client_options(server->port()));
  c10d::TCPStore writer("127.0.0.1", client_options(server->port()));
  std::mutex mutex;
  std::condition_variable changed;
  using Event = std::pair<std::string, std::string>;
  std::vector<Event> events;
  watcher.watchKey(
      "w", [&](c10::optional<std::string> old_value, c10::optional<std::string> new_value) {
        const std::lock_guard<std::mutex> lock(mutex);
        events.emplace_back(old_value.value_or("<none>"), new_value.value_or("<none>"));
        changed.notify_all();
      });
  writer.set("w", bytes("a"));
  writer.set("w", bytes("b"));
  writer.deleteKey("w");
  std::unique_lock<std::mutex> lock(mutex);
  REQUIRE(changed.wait_for(lock, 10s, [&] { return events.size() == 3; }));
  CHECK((events[0] == Event{"<none>", "a"}));
  CHECK((events[1] == Event{"a", "b"}));
  CHECK((events[2] == Event{"b", "<none>"}));
}
