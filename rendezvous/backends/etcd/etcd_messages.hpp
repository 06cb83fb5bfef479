#pragma once
// etcd v3 requests and replies as typed values: what EtcdCodec turns into the JSON gateway's
// bodies and what it reads back from them. Revisions and lease IDs are etcd's int64 values;
// keys and values are raw bytes (the codec does the base64).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ddprun::rendezvous::backends::etcd {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // revision of the key's last creation
  std::int64_t mod_revision = 0;     // revision of its last modification
  std::int64_t version = 0;          // modifications since creation
  std::int64_t lease = 0;            // 0: none
};

// --- requests -----------------------------------------------------------------------------

struct RangeRequest {
  std::string key;
  std::string range_end;    // empty: key alone
  bool count_only = false;  // the reply's count, no key-values
  // > 0: only keys created at or before it. etcd applies it to the key-values it returns, not
  // to count (count_only ignores it): count the returned keys instead.
  std::int64_t max_create_revision = 0;
  bool keys_only = false;  // key-values without their values
};
struct PutRequest {
  std::string key;
  std::string value;
  std::int64_t lease = 0;  // 0: none
};
using TxnOperation = std::variant<RangeRequest, PutRequest>;

// One comparison of a txn; an absent key compares as create/mod revision 0.
struct TxnCompare {
  enum class Target { kCreateRevision, kModRevision, kValue };
  std::string key;
  Target target = Target::kModRevision;
  std::int64_t revision = 0;  // for the revision targets
  std::string value;          // for kValue
};
struct TxnRequest {
  std::vector<TxnCompare> compare;
  std::vector<TxnOperation> success;
  std::vector<TxnOperation> failure;
};

// --- replies ------------------------------------------------------------------------------

struct RangeReply {
  std::int64_t revision = 0;  // the store's revision when the read was served
  std::vector<EtcdKeyValue> kvs;
  std::int64_t count = 0;  // keys in the range (omitted by etcd when 0)
};
struct PutReply {
  std::int64_t revision = 0;
};
using TxnOperationReply = std::variant<RangeReply, PutReply>;
struct TxnReply {
  std::int64_t revision = 0;
  bool succeeded = false;
  std::vector<TxnOperationReply> responses;  // one per operation of the branch that ran
};
struct LeaseGrantReply {
  std::int64_t id = 0;
  std::int64_t ttl_seconds = 0;
};
struct KeepAliveReply {
  std::int64_t ttl_seconds = 0;  // 0: the lease no longer exists
};
struct WatchEvent {
  bool deleted = false;
  EtcdKeyValue kv;  // the key as written; for a deletion, its mod_revision is the deletion's
};
struct WatchMessage {
  std::int64_t revision = 0;
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;  // > 0: start revision was compacted away
  std::string cancel_reason;
  std::vector<WatchEvent> events;
  std::optional<std::string> error;  // the stream ended with this error (e.g. "no leader")
  bool error_unavailable = false;    // that error is gRPC Unavailable (a member's trouble)
};
// The body of a non-200 reply: {"code":<gRPC code>,"message":...} (also "error" in 3.4/3.5).
struct ErrorReply {
  int code = 0;
  std::string message;
};

}  // namespace ddprun::rendezvous::backends::etcd
