// Every value the round machine reads from the store is checked where it enters: each corrupt
// form (empty, non-text bytes, wrong JSON, over-long, 1e308, counters near int64's end, ranks
// that do not fit together) is a CorruptRecord naming the key and what is wrong.

#include "rendezvous/round/record_checks.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "rendezvous/round/records.hpp"

using namespace ddprun::rendezvous::round;

namespace {

const std::string kKey = "ddprun/rdzv/job/r0/joined";

// The message a check throws, which must be a CorruptRecord.
template <typename Check>
std::string corrupt_message(Check check) {
  try {
    check();
  } catch (const CorruptRecord& corrupt) {
    return corrupt.what();
  }
  FAIL("no CorruptRecord");
  return {};
}

// The message names kKey as corrupt, and the problem. (Catch's combined matchers hold their
// parts by reference, so they are built where they are used.)
void check_names_key_and(const std::string& message, const std::string& problem) {
  CHECK_THAT(message,
             Catch::StartsWith("the key '" + kKey + "' is corrupt: ") && Catch::Contains(problem));
}

}  // namespace

TEST_CASE("the corrupt message names the rendezvous, the key and who likely wrote it") {
  const std::string text =
      corrupt_rendezvous_message("job", corrupt_key_text(kKey, "holds 12 bytes"));
  CHECK(text ==
        "rendezvous 'job': the key 'ddprun/rdzv/job/r0/joined' is corrupt: holds 12 bytes; another "
        "process wrote into this rendezvous (a stale job with the same --rdzv_id, or someone else "
        "on the network): stopping");
  // Bytes that are not text never reach the terminal raw.
  CHECK(corrupt_key_text("a\xff\n", "x") == "the key 'a\\xff\\x0a' is corrupt: x");
  CHECK(shown_value("") == "an empty value");
  CHECK(shown_value("1e308") == "'1e308'");
  CHECK(shown_value("\xff\xfe") == "2 bytes");
  CHECK(shown_value(std::string(4 << 20, 'x')) == "4194304 bytes");
}

TEST_CASE("counters from ADDs: within their bounds, 2^62 and int64's end are corrupt") {
  CHECK(checked_counter(3, 0, kMaxCount, kKey, "joined nodes") == 3);
  check_names_key_and(
      corrupt_message([] { checked_counter(int64_t{1} << 62, 0, kMaxCount, kKey, "nodes"); }),
      "the counter holds 4611686018427387904, outside 0..1048576 nodes");
  check_names_key_and(corrupt_message([] {
                        checked_counter(std::numeric_limits<int64_t>::max(), 1, kMaxRestarts, kKey,
                                        "restarts");
                      }),
                      "9223372036854775807");
  check_names_key_and(corrupt_message([] { checked_counter(-5, 0, kMaxCount, kKey, "nodes"); }),
                      "holds -5");
}

TEST_CASE("counts as text: canonical decimal within bounds only") {
  CHECK(parse_count("2", 1, 8, kKey, "nodes") == 2);
  for (const std::string bad :
       {"", "\xff\xff", "1e308", "-1", "+2", " 2", "02", "2x", "99999999999999999999999"}) {
    INFO(bad);
    check_names_key_and(corrupt_message([&] { parse_count(bad, 1, 8, kKey, "nodes"); }),
                        "not a count of nodes");
  }
  check_names_key_and(corrupt_message([] { parse_count("9", 1, 8, kKey, "nodes"); }),
                      "holds 9, outside 1..8 nodes");
}

TEST_CASE("round numbers: decimal, bounded, present") {
  CHECK(parse_round_number(std::string("7"), kKey) == 7);
  check_names_key_and(corrupt_message([] { parse_round_number(std::nullopt, kKey); }), "vanished");
  check_names_key_and(
      corrupt_message([] { parse_round_number(std::string("18446744073709551615"), kKey); }),
      "not a round number");
  check_names_key_and(corrupt_message([] { parse_round_number(std::string("{}"), kKey); }),
                      "holds '{}', not a round number");
}

TEST_CASE("--nnodes text: N or MIN:MAX") {
  CHECK(parse_nnodes_text("2", kKey).max_nodes == 2);
  CHECK(parse_nnodes_text("1:3", kKey).min_nodes == 1);
  for (const std::string bad : {"", "0", "3:1", "1:", ":2", "1:2:3", "\xff", "2:2"}) {
    INFO(bad);
    check_names_key_and(corrupt_message([&] { parse_nnodes_text(bad, kKey); }), "not --nnodes");
  }
}

TEST_CASE("published errors and claims: bounded printable text") {
  CHECK(published_error("agents disagree", kKey) == "agents disagree");
  check_names_key_and(corrupt_message([] { published_error(std::string(5000, 'e'), kKey); }),
                      "an error message of 5000 bytes");
  check_names_key_and(corrupt_message([] { published_error("two\nlines", kKey); }),
                      "error message");
  check_token(std::nullopt, kKey);
  check_token(std::string("nonce-1"), kKey);
  check_names_key_and(corrupt_message([] { check_token(std::string(), kKey); }),
                      "an empty value, not an agent's claim");
  check_names_key_and(corrupt_message([] { check_token(std::string(4 << 20, 'x'), kKey); }),
                      "4194304 bytes, not an agent's claim");
}

TEST_CASE("node records: every corrupt form names the key") {
  const std::string good = R"({"addr":"a","nonce":"x","pid":1,"nproc":1,"min":1,"max":2})";
  CHECK(decode_node_record(good, kKey).addr == "a");
  check_names_key_and(corrupt_message([] { decode_node_record("", kKey); }),
                      "holds an empty value, not a node record (not JSON)");
  check_names_key_and(corrupt_message([] { decode_node_record("\xff\xfe\xfd", kKey); }),
                      "holds 3 bytes, not a node record (not JSON)");
  check_names_key_and(corrupt_message([] { decode_node_record("[1,2]", kKey); }),
                      "holds JSON '[1,2]', not a node record object");
  check_names_key_and(corrupt_message([] { decode_node_record("1e308", kKey); }),
                      "not a node record object");
  check_names_key_and(corrupt_message([] { decode_node_record(std::string(4 << 20, '{'), kKey); }),
                      "holds 4194304 bytes, more than the 4096 of a node record");
  check_names_key_and(corrupt_message([] {
                        decode_node_record(
                            R"({"addr":"a","nonce":"x","pid":1e308,"nproc":1,"min":1,"max":2})",
                            kKey);
                      }),
                      "'pid'");
  check_names_key_and(
      corrupt_message([] {
        decode_node_record(
            R"({"addr":"a","nonce":"x","pid":1,"nproc":4611686018427387904,"min":1,"max":2})",
            kKey);
      }),
      "'nproc' out of range");
}

TEST_CASE("rank assignments whose ranks do not fit together are corrupt") {
  CHECK(decode_assignment("ok 1 2 4 8 0 1 1", kKey).group_rank == 1);
  for (const std::string bad : {
           "",                           // empty
           "\xff\xff",                   // not text
           "{\"rank\":0}",               // wrong shape
           "ok 0 2 0 2 0 0 1",           // two nodes, no neighbour to watch
           "ok 0 1 0 1 0 1 1",           // alone, yet a neighbour
           "ok 1 2 0 2 0 1 1",           // base rank below the group rank: overlapping ranks
           "ok 0 3 0 2 0 2 1",           // fewer processes than nodes
           "ok 0 2 0 2 0 1 3",           // rank 0 in a slot beyond the round
           "ok 0 2 0 2 2000000000 1 1",  // restarts beyond any job
       }) {
    INFO(bad);
    check_names_key_and(corrupt_message([&] { decode_assignment(bad, kKey); }), "holds");
  }
}
