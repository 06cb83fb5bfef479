#include "rendezvous/backends/kv_backend.hpp"

namespace ddprun::rendezvous::backends {

std::string to_string(round::KvErrorKind kind) {
  switch (kind) {
    case round::KvErrorKind::kUnreachable:
      return "unreachable";
    case round::KvErrorKind::kUnresponsive:
      return "unresponsive";
    case round::KvErrorKind::kProtocol:
      return "protocol error";
    case round::KvErrorKind::kRejected:
      return "rejected";
    case round::KvErrorKind::kCorrupt:
      return "corrupt record";
  }
  return "unknown error";
}

}  // namespace ddprun::rendezvous::backends
