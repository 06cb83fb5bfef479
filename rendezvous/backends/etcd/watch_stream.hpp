#pragma once
// One etcd watch over a key range, from a start revision, that survives the loss of members:
// when its stream breaks (member killed, member lost its leader, garbage), it reopens on the
// next member from the revision after the last event it delivered, so no event is lost or
// repeated. It fails only when no member could be watched for the whole failover budget.
//
// etcd's gateway reads a watch request until its body ends, so each watch has a connection of
// its own; destroying the WatchStream closes it, which is how a watch is cancelled.
// Threading: one io_context thread; callbacks never run inside the constructor or start().

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_client.hpp"
#include "rendezvous/backends/etcd/etcd_messages.hpp"
#include "rendezvous/backends/etcd/failover_log.hpp"
#include "rendezvous/backends/etcd/lifetime.hpp"

namespace ddprun::rendezvous::backends::etcd {

class WatchStream {
 public:
  struct Handlers {
    std::function<void(const std::vector<WatchEvent>&)> on_events;
    // The start revision was compacted away: the owner must read again and watch anew.
    std::function<void()> on_compacted;
    // No member could be watched within the failover budget.
    std::function<void(EtcdFailure)> on_failure;
  };

  // Watches [key, range_end) (range_end empty: key alone) from start_revision.
  WatchStream(EtcdClient& client, std::string key, std::string range_end,
              std::int64_t start_revision, Handlers handlers);
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;
  ~WatchStream();

  void start();

 private:
  using Clock = std::chrono::steady_clock;

  void open();
  void open_with_token();
  void on_line(std::string_view line);
  void on_trouble(FailoverLog::Trouble trouble, const std::string& detail);
  void reopen_later();

  EtcdClient& client_;
  std::string key_;
  std::string range_end_;
  std::int64_t next_revision_;  // the first revision not delivered yet
  Handlers handlers_;
  std::shared_ptr<HttpConnection> connection_;
  std::string token_;  // the auth token the current stream carries
  std::size_t member_ = 0;
  bool created_ = false;  // the current stream confirmed the watch
  bool stopped_ = false;
  // Failover bookkeeping since the last stream that worked.
  std::optional<Clock::time_point> failing_since_;
  std::optional<FailoverLog> log_;
  std::size_t failed_attempts_ = 0;
  std::chrono::milliseconds backoff_;
  boost::asio::steady_timer retry_timer_;
  Lifetime lifetime_;
};

}  // namespace ddprun::rendezvous::backends::etcd
