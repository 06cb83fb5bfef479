// Byte-level golden tests: the captured PyTorch 1.13 exchange (G0, tcpstore_protocol.md
// Appendix A) replayed against our server must get the captured replies byte for byte; G2
// requests written from the reference (Appendix B, §3.1, §4) must get the documented ones.

#include <catch2/catch.hpp>

#include "raw_connection.hpp"
#include "rendezvous/store/store_server.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;
using ddprun::rendezvous::store::testing::RawConnection;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<StoreServer> start_server() {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  return StoreServer::start(options);
}

// Sends a request and requires exactly `reply` back.
void exchange(RawConnection& connection, const std::string& request, const std::string& reply) {
  connection.send(hex(request));
  const auto expected = hex(reply);
  CHECK(connection.receive(expected.size()) == expected);
}

const std::string kValidate = "00 ce f7 85 3c";

}  // namespace

TEST_CASE("G0: the captured 1.13 exchange gets the captured replies", "[integration]") {
  const auto server = start_server();
  RawConnection c(server->port());
  // set("k1","v1") ; get("k1")
  c.send(hex("00 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31"));
  exchange(c, "05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31", "00");
  exchange(c, "02 03 00 00 00 00 00 00 00 2f 6b 31", "02 00 00 00 00 00 00 00 76 31");
  // add("cnt",5) ; add("cnt",-2) ; get("cnt") -> "3"
  exchange(c, "03 04 00 00 00 00 00 00 00 2f 63 6e 74 05 00 00 00 00 00 00 00",
           "05 00 00 00 00 00 00 00");
  exchange(c, "03 04 00 00 00 00 00 00 00 2f 63 6e 74 fe ff ff ff ff ff ff ff",
           "03 00 00 00 00 00 00 00");
  exchange(c, "05 01 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00 2f 63 6e 74", "00");
  exchange(c, "02 04 00 00 00 00 00 00 00 2f 63 6e 74", "01 00 00 00 00 00 00 00 33");
  // compare_set: missing/"" -> X; missing/"Y" -> Y (not created); match; mismatch
  exchange(c,
           "01 0b 00 00 00 00 00 00 00 2f 63 73 5f 6d 69 73 73 69 6e 67"
           " 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 58",
           "01 00 00 00 00 00 00 00 58");
  exchange(c,
           "01 0c 00 00 00 00 00 00 00 2f 63 73 5f 6d 69 73 73 69 6e 67 32"
           " 01 00 00 00 00 00 00 00 59 01 00 00 00 00 00 00 00 5a",
           "01 00 00 00 00 00 00 00 59");
  exchange(c,
           "01 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31 02 00 00 00 00 00 "
           "00 00 76 32",
           "02 00 00 00 00 00 00 00 76 32");
  exchange(c,
           "01 03 00 00 00 00 00 00 00 2f 6b 31 03 00 00 00 00 00 00 00 62 61 64 02 00 00 00 00 "
           "00 00 00 76 33",
           "02 00 00 00 00 00 00 00 76 32");
  // wait(["k1"]) ; num_keys() -> 3
  exchange(c, "05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31", "00");
  exchange(c, "06", "03 00 00 00 00 00 00 00");
  // delete_key twice
  exchange(c, "08 03 00 00 00 00 00 00 00 2f 6b 31", "01 00 00 00 00 00 00 00");
  exchange(c, "08 03 00 00 00 00 00 00 00 2f 6b 31", "00 00 00 00 00 00 00 00");
  // set("empty","") ; get("empty") -> ""
  c.send(hex("00 06 00 00 00 00 00 00 00 2f 65 6d 70 74 79 00 00 00 00 00 00 00 00"));
  exchange(c, "05 01 00 00 00 00 00 00 00 06 00 00 00 00 00 00 00 2f 65 6d 70 74 79", "00");
  exchange(c, "02 06 00 00 00 00 00 00 00 2f 65 6d 70 74 79", "00 00 00 00 00 00 00 00");
  // Raw probes: CHECK [present, missing] -> 01; CHECK [] -> 00; WAIT [] -> 00.
  exchange(c,
           "04 02 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00 2f 63 6e 74"
           " 01 00 00 00 00 00 00 00 7a",
           "01");
  exchange(c, "04 00 00 00 00 00 00 00 00", "00");
  exchange(c, "05 00 00 00 00 00 00 00 00", "00");
}

TEST_CASE("G0: one SET satisfies a WAIT that lists the key twice; half a WAIT stays silent",
          "[integration]") {
  const auto server = start_server();
  RawConnection waiter(server->port());
  RawConnection setter(server->port());
  waiter.send(
      hex("05 02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 61"
          " 01 00 00 00 00 00 00 00 61"));
  CHECK(waiter.silent_for(50ms));
  setter.send(hex("00 01 00 00 00 00 00 00 00 61 01 00 00 00 00 00 00 00 31"));
  CHECK(waiter.receive(1) == hex("00"));

  waiter.send(
      hex("05 02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 61"
          " 01 00 00 00 00 00 00 00 62"));
  CHECK(waiter.silent_for(100ms));
  setter.send(hex("00 01 00 00 00 00 00 00 00 62 00 00 00 00 00 00 00 00"));
  CHECK(waiter.receive(1) == hex("00"));
}

TEST_CASE("G0: WATCH_KEY registers and pushes created, updated and deleted", "[integration]") {
  const auto server = start_server();
  RawConnection watcher(server->port());
  RawConnection main(server->port());
  exchange(watcher, "07 01 00 00 00 00 00 00 00 77", "03");
  main.send(hex("00 01 00 00 00 00 00 00 00 77 01 00 00 00 00 00 00 00 41"));
  CHECK(watcher.receive(27) == hex("01 01 00 00 00 00 00 00 00 77 00 00 00 00 00 00 00 00"
                                   " 01 00 00 00 00 00 00 00 41"));
  main.send(hex("00 01 00 00 00 00 00 00 00 77 01 00 00 00 00 00 00 00 42"));
  CHECK(watcher.receive(28) == hex("00 01 00 00 00 00 00 00 00 77 01 00 00 00 00 00 00 00 41"
                                   " 01 00 00 00 00 00 00 00 42"));
  exchange(main, "08 01 00 00 00 00 00 00 00 77", "01 00 00 00 00 00 00 00");
  CHECK(watcher.receive(27) == hex("02 01 00 00 00 00 00 00 00 77 01 00 00 00 00 00 00 00 42"
                                   " 00 00 00 00 00 00 00 00"));
}

TEST_CASE("G2: VALIDATE, PING and every operation", "[integration]") {
  const auto server = start_server();
  RawConnection c(server->port());
  c.send(hex(kValidate));
  exchange(c, "0d 39 30 00 00", "39 30 00 00");
  // SET (1), WAIT (6), GET (3)
  c.send(hex("01 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31"));
  exchange(c, "06 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31", "00");
  exchange(c, "03 03 00 00 00 00 00 00 00 2f 6b 31", "02 00 00 00 00 00 00 00 76 31");
  // ADD (4)
  exchange(c, "04 04 00 00 00 00 00 00 00 2f 63 6e 74 05 00 00 00 00 00 00 00",
           "05 00 00 00 00 00 00 00");
  // COMPARE_SET (2): match
  exchange(c,
           "02 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31 02 00 00 00 00 00 "
           "00 00 76 32",
           "02 00 00 00 00 00 00 00 76 32");
  // CHECK (5): present -> 00, missing -> 01
  exchange(c, "05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31", "00");
  exchange(c, "05 01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 7a", "01");
  // GETNUMKEYS (7)
  exchange(c, "07", "02 00 00 00 00 00 00 00");
  // APPEND (9) creates then extends; GET sees both parts
  c.send(hex("09 01 00 00 00 00 00 00 00 61 01 00 00 00 00 00 00 00 78"));
  c.send(hex("09 01 00 00 00 00 00 00 00 61 01 00 00 00 00 00 00 00 79"));
  exchange(c, "03 01 00 00 00 00 00 00 00 61", "02 00 00 00 00 00 00 00 78 79");
  // MULTI_SET (11) then MULTI_GET (10), in request order
  c.send(
      hex("0b 02 00 00 00 00 00 00 00"
          " 01 00 00 00 00 00 00 00 70 01 00 00 00 00 00 00 00 31"
          " 01 00 00 00 00 00 00 00 71 02 00 00 00 00 00 00 00 32 32"));
  exchange(c, "0a 02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 71 01 00 00 00 00 00 00 00 70",
           "02 00 00 00 00 00 00 00 32 32 01 00 00 00 00 00 00 00 31");
  // DELETE_KEY (8)
  exchange(c, "08 01 00 00 00 00 00 00 00 70", "01 00 00 00 00 00 00 00");
  exchange(c, "07", "04 00 00 00 00 00 00 00");
  // WAIT that times out, then CANCEL_WAIT (12) -> WAIT_CANCELED; a later SET sends nothing
  c.send(hex("06 01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 6e"));
  CHECK(c.silent_for(50ms));
  exchange(c, "0c", "01");
  c.send(hex("01 01 00 00 00 00 00 00 00 6e 00 00 00 00 00 00 00 00"));
  CHECK(c.silent_for(50ms));
  // QUEUE_PUSH (14), QUEUE_LEN (16), QUEUE_POP (15): len before pop, then the item
  c.send(hex("0e 01 00 00 00 00 00 00 00 51 01 00 00 00 00 00 00 00 61"));
  c.send(hex("0e 01 00 00 00 00 00 00 00 51 01 00 00 00 00 00 00 00 62"));
  exchange(c, "10 01 00 00 00 00 00 00 00 51", "02 00 00 00 00 00 00 00");
  exchange(c, "0f 01 00 00 00 00 00 00 00 51",
           "02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 61");
  exchange(c, "0f 01 00 00 00 00 00 00 00 51",
           "01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 62");
  exchange(c, "0f 01 00 00 00 00 00 00 00 51", "00 00 00 00 00 00 00 00");
  // BARRIER (18): world size 2; the first caller waits, the second releases both
  RawConnection other(server->port());
  other.send(hex(kValidate));
  c.send(hex("12 01 00 00 00 00 00 00 00 62 02 00 00 00 00 00 00 00"));
  CHECK(c.silent_for(50ms));
  exchange(other, "12 01 00 00 00 00 00 00 00 62 02 00 00 00 00 00 00 00", "00");
  CHECK(c.receive(1) == hex("00"));
}

TEST_CASE(
    "G2: a WAIT satisfied just before CANCEL_WAIT answers STOP_WAITING then "
    "WAIT_CANCELED",
    "[integration]") {
  const auto server = start_server();
  RawConnection c(server->port());
  c.send(hex(kValidate));
  c.send(hex("06 01 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 6e"));
  c.send(hex("01 01 00 00 00 00 00 00 00 6e 00 00 00 00 00 00 00 00"));
  exchange(c, "0c", "00 01");
}

TEST_CASE("G2: LIST_KEYS returns every stored key", "[integration]") {
  const auto server = start_server();
  RawConnection c(server->port());
  c.send(hex(kValidate));
  c.send(hex("01 02 00 00 00 00 00 00 00 2f 61 01 00 00 00 00 00 00 00 31"));
  exchange(c, "11", "01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 2f 61");
}

TEST_CASE("G2: a second VALIDATE or a wrong magic closes the connection", "[integration]") {
  const auto server = start_server();
  RawConnection twice(server->port());
  twice.send(hex(kValidate));
  twice.send(hex(kValidate));
  CHECK(twice.closed_within(2s));
  RawConnection ping_first(server->port());
  ping_first.send(hex("0d 39 30 00 00"));  // G0 opcode 13 does not exist
  CHECK(ping_first.closed_within(2s));
}
