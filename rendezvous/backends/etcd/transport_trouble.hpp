#pragma once
// What a member's transport failure means for failover, the one rule shared by unary calls
// (EtcdClient) and watches (WatchStream).

#include "rendezvous/backends/etcd/failover_log.hpp"
#include "rendezvous/backends/etcd/http_connection.hpp"

namespace ddprun::rendezvous::backends::etcd {

// failure is not kNone: a reply that arrived is judged by its status and body instead.
inline FailoverLog::Trouble transport_trouble(HttpFailure failure) {
  switch (failure) {
    case HttpFailure::kConnect:
    case HttpFailure::kBroken:
      return FailoverLog::Trouble::kUnreachable;
    case HttpFailure::kTls:
      return FailoverLog::Trouble::kTls;
    case HttpFailure::kTimeout:
      return FailoverLog::Trouble::kUnresponsive;
    case HttpFailure::kNone:
    case HttpFailure::kProtocol:
      break;
  }
  return FailoverLog::Trouble::kProtocol;
}

}  // namespace ddprun::rendezvous::backends::etcd
