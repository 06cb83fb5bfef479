// EtcdCodec: JSON bodies of etcd's v3 gateway (see etcd_codec.hpp for the decoding rules).

#include "rendezvous/backends/etcd/etcd_codec.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

#include "rendezvous/backends/etcd/base64.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) {
  throw EtcdProtocolError(what);
}

// The field, or nullptr where it is absent or null (the gateway leaves out zero values).
const json* present_field(const json& parent, const char* name) {
  const auto found = parent.find(name);
  return found == parent.end() || found->is_null() ? nullptr : &*found;
}

[[noreturn]] void not_a(const char* name, const char* kind) {
  bad(std::string("field '") + name + "' is not " + kind);
}

// present_field, checked to be of one JSON kind (is_kind: json::is_object, ...).
const json* typed_field(const json& parent, const char* name,
                        bool (json::*is_kind)() const noexcept, const char* kind) {
  const json* field = present_field(parent, name);
  if (field != nullptr && !(field->*is_kind)()) {
    not_a(name, kind);
  }
  return field;
}

const json& object_field(const json& parent, const char* name) {
  static const json kEmptyObject = json::object();
  const json* field = typed_field(parent, name, &json::is_object, "an object");
  return field != nullptr ? *field : kEmptyObject;
}

const json& array_field(const json& parent, const char* name) {
  static const json kEmptyArray = json::array();
  const json* field = typed_field(parent, name, &json::is_array, "an array");
  return field != nullptr ? *field : kEmptyArray;
}

const json& require_object(const json& value, const char* what) {
  if (!value.is_object()) {
    bad(std::string(what) + " is not a JSON object");
  }
  return value;
}

std::int64_t int64_field(const json& parent, const char* name) {
  const json* field = present_field(parent, name);
  if (field == nullptr) {
    return 0;
  }
  if (field->is_number_unsigned() &&
      field->get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    bad(std::string("field '") + name + "' is out of the int64 range");
  }
  if (field->is_number_integer()) {
    return field->get<std::int64_t>();
  }
  if (field->is_string()) {
    const auto& text = field->get_ref<const std::string&>();
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
      bad(std::string("field '") + name + "' is not an int64: '" + text.substr(0, 40) + "'");
    }
    return value;
  }
  not_a(name, "an int64");
}

bool bool_field(const json& parent, const char* name) {
  const json* field = typed_field(parent, name, &json::is_boolean, "a boolean");
  return field != nullptr && field->get<bool>();
}

std::string string_field(const json& parent, const char* name) {
  const json* field = typed_field(parent, name, &json::is_string, "a string");
  return field != nullptr ? field->get<std::string>() : std::string();
}

std::string bytes_field(const json& parent, const char* name) {
  const std::string text = string_field(parent, name);
  auto decoded = base64_decode(text);
  if (!decoded) {
    bad(std::string("field '") + name + "' is not base64");
  }
  return std::move(*decoded);
}

std::int64_t header_revision(const json& reply) {
  return int64_field(object_field(reply, "header"), "revision");
}

EtcdKeyValue decode_kv(const json& value) {
  require_object(value, "a key-value");
  EtcdKeyValue kv;
  kv.key = bytes_field(value, "key");
  kv.value = bytes_field(value, "value");
  kv.create_revision = int64_field(value, "create_revision");
  kv.mod_revision = int64_field(value, "mod_revision");
  kv.version = int64_field(value, "version");
  kv.lease = int64_field(value, "lease");
  return kv;
}

// A range alone or inside a txn: the same fields (a txn's count-only read of the tickets would
// otherwise return every ticket).
json encode_range(const RangeRequest& request) {
  json body = {{"key", base64_encode(request.key)}};
  if (!request.range_end.empty()) {
    body["range_end"] = base64_encode(request.range_end);
  }
  if (request.count_only) {
    body["count_only"] = true;
  }
  if (request.keys_only) {
    body["keys_only"] = true;
  }
  if (request.max_create_revision > 0) {
    body["max_create_revision"] = std::to_string(request.max_create_revision);
  }
  return body;
}

json encode_operation(const TxnOperation& operation) {
  if (const auto* range = std::get_if<RangeRequest>(&operation)) {
    return {{"request_range", encode_range(*range)}};
  }
  const auto& put = std::get<PutRequest>(operation);
  json body = {{"key", base64_encode(put.key)}, {"value", base64_encode(put.value)}};
  if (put.lease != 0) {
    body["lease"] = std::to_string(put.lease);
  }
  return {{"request_put", std::move(body)}};
}

json encode_compare(const TxnCompare& compare) {
  json body = {{"key", base64_encode(compare.key)}, {"result", "EQUAL"}};
  switch (compare.target) {
    case TxnCompare::Target::kCreateRevision:
      body["target"] = "CREATE";
      body["create_revision"] = std::to_string(compare.revision);
      break;
    case TxnCompare::Target::kModRevision:
      body["target"] = "MOD";
      body["mod_revision"] = std::to_string(compare.revision);
      break;
    case TxnCompare::Target::kValue:
      body["target"] = "VALUE";
      body["value"] = base64_encode(compare.value);
      break;
  }
  return body;
}

// Nesting depth of JSON text, counting only brackets outside strings; stops early once over.
bool depth_within(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        return false;
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace

std::string EtcdCodec::range(const RangeRequest& request) {
  return encode_range(request).dump();
}

std::string EtcdCodec::put(const PutRequest& request) {
  return encode_operation(request)["request_put"].dump();
}

std::string EtcdCodec::txn(const TxnRequest& request) {
  json compare = json::array();
  for (const auto& entry : request.compare) {
    compare.push_back(encode_compare(entry));
  }
  json success = json::array();
  for (const auto& operation : request.success) {
    success.push_back(encode_operation(operation));
  }
  json failure = json::array();
  for (const auto& operation : request.failure) {
    failure.push_back(encode_operation(operation));
  }
  return json{{"compare", std::move(compare)},
              {"success", std::move(success)},
              {"failure", std::move(failure)}}
      .dump();
}

std::string EtcdCodec::lease_grant(std::int64_t ttl_seconds) {
  return json{{"TTL", std::to_string(ttl_seconds)}}.dump();
}

std::string EtcdCodec::lease_keepalive(std::int64_t id) {
  return json{{"ID", std::to_string(id)}}.dump();
}

std::string EtcdCodec::lease_revoke(std::int64_t id) {
  return json{{"ID", std::to_string(id)}}.dump();
}

std::string EtcdCodec::authenticate(const std::string& user, const std::string& password) {
  return json{{"name", user}, {"password", password}}.dump();
}

std::string EtcdCodec::watch_create(const std::string& key, const std::string& range_end,
                                    std::int64_t start_revision) {
  json create = {{"key", base64_encode(key)}};
  if (!range_end.empty()) {
    create["range_end"] = base64_encode(range_end);
  }
  if (start_revision > 0) {
    create["start_revision"] = std::to_string(start_revision);
  }
  return json{{"create_request", std::move(create)}}.dump();
}

json EtcdCodec::parse(std::string_view text, std::size_t max_depth) {
  if (!depth_within(text, max_depth)) {
    bad("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  }
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    bad("the reply is not JSON: '" + std::string(text.substr(0, 60)) + "'");
  }
  return value;
}

RangeReply EtcdCodec::decode_range(const json& reply) {
  require_object(reply, "a range reply");
  RangeReply range;
  range.revision = header_revision(reply);
  for (const auto& kv : array_field(reply, "kvs")) {
    range.kvs.push_back(decode_kv(kv));
  }
  range.count = int64_field(reply, "count");
  return range;
}

PutReply EtcdCodec::decode_put(const json& reply) {
  require_object(reply, "a put reply");
  return PutReply{header_revision(reply)};
}

TxnReply EtcdCodec::decode_txn(const json& reply) {
  require_object(reply, "a txn reply");
  TxnReply txn;
  txn.revision = header_revision(reply);
  txn.succeeded = bool_field(reply, "succeeded");
  for (const auto& response : array_field(reply, "responses")) {
    require_object(response, "a txn response");
    if (response.contains("response_range")) {
      txn.responses.emplace_back(decode_range(response["response_range"]));
    } else if (response.contains("response_put")) {
      txn.responses.emplace_back(decode_put(response["response_put"]));
    } else {
      bad("a txn response holds neither a range nor a put");
    }
  }
  return txn;
}

LeaseGrantReply EtcdCodec::decode_lease_grant(const json& reply) {
  require_object(reply, "a lease grant reply");
  LeaseGrantReply grant;
  grant.id = int64_field(reply, "ID");
  grant.ttl_seconds = int64_field(reply, "TTL");
  if (grant.id == 0 || grant.ttl_seconds <= 0) {
    bad("a lease grant reply without a lease ID or TTL");
  }
  return grant;
}

std::string EtcdCodec::decode_auth_token(const json& reply) {
  require_object(reply, "an authenticate reply");
  const auto token = reply.find("token");
  if (token == reply.end() || !token->is_string() || token->get_ref<const std::string&>().empty()) {
    bad("an authenticate reply without a token");
  }
  return token->get<std::string>();
}

bool EtcdCodec::is_stale_token(const ErrorReply& error) {
  // etcd 3.4's rpctypes: ErrGRPCInvalidAuthToken, ErrGRPCAuthOldRevision.
  return error.message.find("invalid auth token") != std::string::npos ||
         error.message.find("auth store is old") != std::string::npos;
}

KeepAliveReply EtcdCodec::decode_keepalive(const json& reply) {
  require_object(reply, "a keep-alive reply");
  return KeepAliveReply{int64_field(object_field(reply, "result"), "TTL")};
}

WatchMessage EtcdCodec::decode_watch(const json& line) {
  require_object(line, "a watch message");
  WatchMessage message;
  if (line.contains("error")) {
    const ErrorReply error = decode_error(line);
    message.error = error.message.empty() ? std::string("unspecified error") : error.message;
    message.error_unavailable = error.code == kGrpcUnavailable;
    return message;
  }
  const json& result = object_field(line, "result");
  message.revision = header_revision(result);
  message.created = bool_field(result, "created");
  message.canceled = bool_field(result, "canceled");
  message.compact_revision = int64_field(result, "compact_revision");
  message.cancel_reason = string_field(result, "cancel_reason");
  for (const auto& entry : array_field(result, "events")) {
    require_object(entry, "a watch event");
    WatchEvent event;
    const auto type = entry.find("type");
    if (type == entry.end() || type->is_null() || *type == "PUT" || *type == 0) {
      event.deleted = false;
    } else if (*type == "DELETE" || *type == 1) {
      event.deleted = true;
    } else {
      bad("a watch event of unknown type");
    }
    event.kv = decode_kv(object_field(entry, "kv"));
    message.events.push_back(std::move(event));
  }
  return message;
}

ErrorReply EtcdCodec::decode_error(const json& reply) {
  ErrorReply error;
  if (!reply.is_object()) {
    return error;
  }
  const json* source = &reply;
  if (const auto nested = reply.find("error"); nested != reply.end() && nested->is_object()) {
    source = &*nested;  // a stream's error message
  }
  for (const char* name : {"code", "grpc_code"}) {
    if (const auto code = source->find(name); code != source->end() && code->is_number_integer()) {
      error.code = code->get<int>();
      break;
    }
  }
  for (const char* name : {"message", "error"}) {
    if (const auto text = source->find(name); text != source->end() && text->is_string()) {
      error.message = text->get<std::string>();
      break;
    }
  }
  return error;
}

std::string EtcdCodec::prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = end.back();
    if (static_cast<unsigned char>(last) != 0xff) {
      last = static_cast<char>(static_cast<unsigned char>(last) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace ddprun::rendezvous::backends::etcd
