#pragma once
// Why an etcd request failed, in the round machine's terms (round::KvErrorKind), with what the
// caller needs to retry safely.

#include <string>

#include "rendezvous/round/kv_ops.hpp"

namespace ddprun::rendezvous::backends::etcd {

struct EtcdFailure {
  round::KvErrorKind kind = round::KvErrorKind::kUnreachable;
  std::string message;  // names the endpoints and what failed, ready for the user
  // The request reached a member that did not say it refused it: etcd may have applied it,
  // or may still apply it later (a write that timed out waiting for a quorum).
  bool maybe_applied = false;
  int code = 0;  // gRPC status code when etcd rejected the request (kRejected)
};

inline round::KvError to_kv_error(const EtcdFailure& failure) {
  return round::KvError{failure.kind, failure.message};
}

}  // namespace ddprun::rendezvous::backends::etcd
