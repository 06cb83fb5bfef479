#pragma once
// etcd v3 JSON gateway bodies: encodes requests, decodes replies.
//
// Replies are untrusted input, decoded once here: JSON syntax and nesting depth, field types,
// base64, int64 carried as strings, and the gateway's habit of leaving out every field that
// holds its zero value (no "kvs": no match, no "succeeded": the txn failed, no event "type":
// a put, no "TTL": the lease is gone). Anything else throws EtcdProtocolError.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "rendezvous/backends/etcd/etcd_messages.hpp"

namespace ddprun::rendezvous::backends::etcd {

class EtcdProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// gRPC status codes the gateway reports.
inline constexpr int kGrpcNotFound = 5;
inline constexpr int kGrpcUnavailable = 14;
inline constexpr int kGrpcOutOfRange = 11;

class EtcdCodec {
 public:
  static std::string range(const RangeRequest& request);
  static std::string put(const PutRequest& request);
  static std::string txn(const TxnRequest& request);
  static std::string lease_grant(std::int64_t ttl_seconds);
  static std::string lease_keepalive(std::int64_t id);
  static std::string lease_revoke(std::int64_t id);
  static std::string authenticate(const std::string& user, const std::string& password);
  static std::string watch_create(const std::string& key, const std::string& range_end,
                                  std::int64_t start_revision);

  // Parses a reply body; throws EtcdProtocolError on bad syntax or nesting over max_depth.
  static nlohmann::json parse(std::string_view text, std::size_t max_depth);

  static RangeReply decode_range(const nlohmann::json& reply);
  static PutReply decode_put(const nlohmann::json& reply);
  static TxnReply decode_txn(const nlohmann::json& reply);
  static LeaseGrantReply decode_lease_grant(const nlohmann::json& reply);
  // The one message of a keep-alive stream: {"result":{...}} or {"error":{...}}.
  static KeepAliveReply decode_keepalive(const nlohmann::json& reply);
  // The token of an /v3/auth/authenticate reply.
  static std::string decode_auth_token(const nlohmann::json& reply);
  // etcd refused a request for its auth token (expired, or the auth store changed since it was
  // issued): a fresh token makes the same request pass.
  static bool is_stale_token(const ErrorReply& error);
  static WatchMessage decode_watch(const nlohmann::json& line);
  // Lenient: any JSON; fields that are missing or of the wrong type stay empty.
  static ErrorReply decode_error(const nlohmann::json& reply);

  // The smallest key after every key that starts with prefix (etcd's range_end for a
  // prefix); "\0" when there is none (prefix all 0xff), meaning "to the end".
  static std::string prefix_end(std::string_view prefix);
};

}  // namespace ddprun::rendezvous::backends::etcd
