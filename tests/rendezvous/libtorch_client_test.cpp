// LibTorch's own c10d::TCPStore client (PyTorch 2.x, the G2 protocol) against our server: every
// operation it offers, a timed-out wait followed by more use of the same client, and clone().
// The G0 client (Debian's torch 1.13) is covered from Python (python_client_test.cpp); its
// WATCH_KEY, which LibTorch 2.x no longer offers, by golden_test.cpp's recorded exchanges.

#include <algorithm>
#include <exception>
#include <thread>

// clang-format off
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// LibTorch brings glog-style CHECK macros, which would replace Catch's: Catch comes after.
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

TEST_CASE("c10d::TCPStore 2.x client: every operation", "[interop]") {
  const auto server = start_server();
  c10d::TCPStore store("127.0.0.1", client_options(server->port()));
  CHECK(store.hasExtendedApi());

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

  store.append("log", bytes("a"));
  store.append("log", bytes("bc"));
  CHECK(store.get("log") == bytes("abc"));
  store.multiSet({"m1", "m2"}, {bytes("x"), bytes("")});
  CHECK(store.multiGet({"m2", "m1", "log"}) ==
        std::vector<std::vector<uint8_t>>{bytes(""), bytes("x"), bytes("abc")});

  store.queuePush("q", bytes("first"));
  store.queuePush("q", bytes("second"));
  CHECK(store.queueLen("q") == 2);
  CHECK(store.queuePop("q", /*block=*/true) == bytes("first"));
  CHECK(store.queuePop("q", /*block=*/false) == bytes("second"));
  CHECK(store.queueLen("q") == 0);
  CHECK_THROWS(store.queuePop("q", /*block=*/false));

  // /k1, /cnt, /cs, /log, /m1, /m2 (waitWorkers=false: no init/ key; queues are not keys)
  CHECK(store.getNumKeys() == 6);
  auto keys = store.listKeys();
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"cnt", "cs", "k1", "log", "m1", "m2"});  // prefix stripped
  CHECK(store.deleteKey("k1"));
  CHECK_FALSE(store.deleteKey("k1"));
  CHECK(store.getNumKeys() == 5);

  store.wait({"cnt", "cs"});
  store.wait({"cnt"}, 1s);
  CHECK_THROWS(store.wait({"never"}, 300ms));
  // The same client goes on working after the timed-out wait (G2 cancels it on the server).
  store.set("after", bytes("timeout"));
  CHECK(store.get("after") == bytes("timeout"));
  CHECK(store.add("cnt", 1) == 4);

  const auto twin = store.clone();  // a second connection to the same server
  twin->set("never", bytes("now"));
  store.wait({"never"}, 5s);
  CHECK(store.get("never") == bytes("now"));

  const std::vector<uint8_t> binary{0, 1, 0, 255, 0};
  store.set("bin", binary);
  CHECK(store.get("bin") == binary);
  const std::vector<uint8_t> big(1 << 20, 0x5a);
  store.set("big", big);
  CHECK(twin->get("big") == big);
}

TEST_CASE("c10d::TCPStore 2.x client: barrier of two clients", "[interop]") {
  const auto server = start_server();
  c10d::TCPStore first("127.0.0.1", client_options(server->port()));
  c10d::TCPStore second("127.0.0.1", client_options(server->port()));
  std::exception_ptr other_failed;
  std::thread other([&] {
    try {
      second.barrier("meet", 2, 10s);
    } catch (...) {
      other_failed = std::current_exception();
    }
  });
  CHECK_NOTHROW(first.barrier("meet", 2, 10s));  // returns only once both have arrived
  other.join();
  CHECK_FALSE(other_failed);
}
