// The etcd JSON gateway codec without a server: base64, request bodies, and replies with the
// gateway's omitted zero values, both error shapes, and hostile input.

#include "rendezvous/backends/etcd/etcd_codec.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "rendezvous/backends/etcd/base64.hpp"
#include "rendezvous/backends/etcd/txn_batch.hpp"

using namespace ddprun::rendezvous::backends::etcd;
using nlohmann::json;

namespace {

json parse(const std::string& text) {
  return EtcdCodec::parse(text, 32);
}

}  // namespace

TEST_CASE("base64 round-trips bytes and rejects what is not canonical base64", "[etcd]") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode(std::string("\0\xff\xfe", 3)) == "AP/+");
  for (const std::string& text :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\x80\xff", 3)}) {
    CHECK(base64_decode(base64_encode(text)) == text);
  }
  CHECK_FALSE(base64_decode("Zg="));
  CHECK_FALSE(base64_decode("Z==="));
  CHECK_FALSE(base64_decode("Zg=a"));
  CHECK_FALSE(base64_decode("Zg==Zg=="));
  CHECK_FALSE(base64_decode("Zm9*"));
}

TEST_CASE("etcd requests are the gateway's JSON", "[etcd]") {
  const auto txn =
      parse(EtcdCodec::txn(TxnRequest{{{"k", TxnCompare::Target::kModRevision, 7, {}},
                                       {"f", TxnCompare::Target::kCreateRevision, 0, {}}},
                                      {PutRequest{"k", "v", 0}, PutRequest{"f", "applied", 42}},
                                      {RangeRequest{"k", {}}, RangeRequest{"a", "b", true}}}));
  CHECK(txn["compare"][0] ==
        json{{"key", "aw=="}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", "7"}});
  CHECK(txn["compare"][1]["create_revision"] == "0");
  CHECK(txn["success"][0]["request_put"] == json{{"key", "aw=="}, {"value", "dg=="}});
  CHECK(txn["success"][1]["request_put"]["lease"] == "42");
  CHECK(txn["failure"][0]["request_range"] == json{{"key", "aw=="}});
  // A range in a txn keeps its options: a count-only read of N keys must not return them.
  CHECK(txn["failure"][1]["request_range"] ==
        json{{"key", "YQ=="}, {"range_end", "Yg=="}, {"count_only", true}});
  CHECK(
      parse(EtcdCodec::watch_create("a", "b", 12)) ==
      json{{"create_request", {{"key", "YQ=="}, {"range_end", "Yg=="}, {"start_revision", "12"}}}});
  CHECK(EtcdCodec::prefix_end("p/") == "p0");
  CHECK(EtcdCodec::prefix_end("a\xff") == "b");
  CHECK(EtcdCodec::prefix_end("\xff\xff") == std::string(1, '\0'));
}

TEST_CASE("etcd replies: omitted zero values take their defaults", "[etcd]") {
  const auto empty = EtcdCodec::decode_range(parse(R"({"header":{"revision":"5"}})"));
  CHECK(empty.revision == 5);
  CHECK(empty.kvs.empty());
  const auto found = EtcdCodec::decode_range(parse(
      R"({"header":{"revision":"9"},"kvs":[{"key":"YQ==","create_revision":"3","mod_revision":"8","version":"2"}],"count":"1"})"));
  REQUIRE(found.kvs.size() == 1);
  CHECK(found.kvs[0].key == "a");
  CHECK(found.kvs[0].value.empty());  // an empty value is left out
  CHECK(found.kvs[0].mod_revision == 8);
  CHECK(found.kvs[0].lease == 0);
  const auto failed = EtcdCodec::decode_txn(parse(
      R"({"header":{"revision":"4"},"responses":[{"response_range":{"header":{"revision":"4"}}}]})"));
  CHECK_FALSE(failed.succeeded);
  REQUIRE(failed.responses.size() == 1);
  CHECK(std::get<RangeReply>(failed.responses[0]).kvs.empty());
  CHECK(EtcdCodec::decode_keepalive(parse(R"({"result":{"header":{},"ID":"99"}})")).ttl_seconds ==
        0);
  CHECK(EtcdCodec::decode_keepalive(parse(R"({"result":{"ID":"99","TTL":"7"}})")).ttl_seconds == 7);
  const auto grant =
      EtcdCodec::decode_lease_grant(parse(R"({"ID":"4111120420760384786","TTL":"10"})"));
  CHECK(grant.id == 4111120420760384786);
  const auto events = EtcdCodec::decode_watch(parse(
      R"({"result":{"header":{"revision":"12"},"watch_id":"1","events":[{"kv":{"key":"YQ==","mod_revision":"11","value":"dg=="}},{"type":"DELETE","kv":{"key":"Yg==","mod_revision":"12"}}]}})"));
  REQUIRE(events.events.size() == 2);
  CHECK_FALSE(events.events[0].deleted);
  CHECK(events.events[0].kv.value == "v");
  CHECK(events.events[1].deleted);
  const auto created =
      EtcdCodec::decode_watch(parse(R"({"result":{"header":{"revision":"3"},"created":true}})"));
  CHECK(created.created);
  const auto compacted =
      EtcdCodec::decode_watch(parse(R"({"result":{"canceled":true,"compact_revision":"40"}})"));
  CHECK(compacted.canceled);
  CHECK(compacted.compact_revision == 40);
}

TEST_CASE("etcd error replies: both gateway shapes and stream errors", "[etcd]") {
  const auto v1 = EtcdCodec::decode_error(parse(
      R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})"));
  CHECK(v1.code == kGrpcNotFound);
  CHECK(v1.message == "etcdserver: requested lease not found");
  const auto v2 = EtcdCodec::decode_error(
      parse(R"({"code":14,"message":"etcdserver: no leader","details":[]})"));
  CHECK(v2.code == kGrpcUnavailable);
  const auto stream = EtcdCodec::decode_watch(parse(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})"));
  REQUIRE(stream.error);
  CHECK(*stream.error == "etcdserver: no leader");
  CHECK(stream.error_unavailable);
}

TEST_CASE("etcd replies that break the rules are protocol errors", "[etcd]") {
  CHECK_THROWS_AS(parse("{nope"), EtcdProtocolError);
  CHECK_THROWS_AS(parse(std::string(100, '[') + std::string(100, ']')), EtcdProtocolError);
  CHECK_NOTHROW(parse(R"({"s":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})"));
  CHECK_THROWS_AS(EtcdCodec::decode_range(parse(R"({"kvs":"no"})")), EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_range(parse(R"({"kvs":[{"key":"***"}]})")), EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_range(parse(R"({"header":{"revision":"12x"}})")),
                  EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_range(parse(R"({"header":{"revision":18446744073709551615}})")),
                  EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_range(parse("[]")), EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_txn(parse(R"({"succeeded":"yes"})")), EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_txn(parse(R"({"responses":[{"response_txn":{}}]})")),
                  EtcdProtocolError);
  CHECK_THROWS_AS(EtcdCodec::decode_lease_grant(parse(R"({"TTL":"5"})")), EtcdProtocolError);
  CHECK_THROWS_AS(
      EtcdCodec::decode_watch(parse(R"({"result":{"events":[{"type":"MOVE","kv":{}}]}})")),
      EtcdProtocolError);
}

TEST_CASE("txn batches stay under etcd's 128 operations and request size", "[etcd]") {
  std::vector<TxnOperation> puts;
  for (int i = 0; i < 300; ++i) {
    puts.emplace_back(PutRequest{std::string("k").append(std::to_string(i)), "v", 0});
  }
  const auto txns = TxnBatch::split(std::move(puts));
  REQUIRE(txns.size() == 3);
  CHECK(txns[0].success.size() == 128);
  CHECK(txns[2].success.size() == 300 - 256);
  std::vector<TxnOperation> big;
  for (int i = 0; i < 4; ++i) {
    big.emplace_back(
        PutRequest{std::string("k").append(std::to_string(i)), std::string(300 * 1024, 'x'), 0});
  }
  CHECK(TxnBatch::split(std::move(big)).size() == 4);
}
