// Threading: runs on the calling thread, one epoll set for every connection of the storm.

#include "bench/store/storm_load.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include "bench/store/load_connection.hpp"
#include "bench/store/steady_ns.hpp"

namespace ddprun::bench::store {
namespace {

constexpr std::size_t kScratchBytes = 64 * 1024;
constexpr int kMaxEventsPerWait = 1024;
// PyTorch's client waits 0.25 to 0.75 s before its first retry; a shorter fixed delay keeps
// the figure about the server rather than about the back-off.
constexpr std::int64_t kRetryDelayNs = 100'000'000;

enum class Stage : std::uint8_t { connecting, handshaking, adding, waiting, done };

struct StormSlot {
  LoadConnection connection;
  Stage stage = Stage::connecting;
  bool write_armed = false;
};

class Storm {
 public:
  explicit Storm(const StormOptions& options)
      : options_(options),
        epoll_(::epoll_create1(EPOLL_CLOEXEC)),
        slots_(static_cast<std::size_t>(options.connections)),
        scratch_(kScratchBytes),
        add_count_(kG2Requests.add(options.key_prefix + "count", 1)),
        set_go_(kG2Requests.set(options.key_prefix + "go", "1")),
        wait_go_(kG2Requests.wait({options.key_prefix + "go"})) {}

  StormResult run() {
    if (!epoll_) {
      result_.failure = std::string("epoll_create1: ") + std::strerror(errno);
      return result_;
    }
    started_ns_ = steady_ns();
    const std::int64_t deadline = started_ns_ + std::chrono::nanoseconds(options_.limit).count();
    for (std::size_t i = 0; i < slots_.size() && result_.failure.empty(); ++i) {
      open(i);
    }
    while (result_.failure.empty() && woken_ < slots_.size()) {
      const std::int64_t now = steady_ns();
      if (now >= deadline) {
        result_.failure = "timeout after " + std::to_string(options_.limit.count()) +
                          " s: " + std::to_string(connected_) + " connected, " +
                          std::to_string(woken_) + " woken of " + std::to_string(slots_.size());
        break;
      }
      std::int64_t wake_at = deadline;
      if (!retries_.empty()) {
        wake_at = std::min(wake_at, retries_.front().first);
      }
      const int count = ::epoll_wait(
          epoll_.get(), events_.data(), kMaxEventsPerWait,
          static_cast<int>((std::max<std::int64_t>(0, wake_at - now) + 999'999) / 1'000'000));
      for (int e = 0; e < count && result_.failure.empty(); ++e) {
        handle(static_cast<std::size_t>(events_[e].data.u64), events_[e].events);
      }
      const std::int64_t after = steady_ns();
      while (!retries_.empty() && retries_.front().first <= after && result_.failure.empty()) {
        const std::size_t index = retries_.front().second;
        retries_.pop_front();
        open(index);
      }
    }
    result_.complete = result_.failure.empty();
    return result_;
  }

 private:
  void open(std::size_t index) {
    auto& slot = slots_[index];
    int error = 0;
    OwnedFd socket = start_connect(options_.server, error);
    if (!socket) {
      if (error == EMFILE || error == ENFILE) {
        result_.failure = "out of descriptors at connection " + std::to_string(index);
      } else {
        retry_later(index);
      }
      return;
    }
    slot.connection = LoadConnection(std::move(socket));
    slot.stage = Stage::connecting;
    slot.connection.output() += kG2Requests.validate_and_ping(static_cast<std::uint32_t>(index));
    slot.connection.expect(ReplyKind::echo, steady_ns());
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT;
    event.data.u64 = index;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, slot.connection.fd(), &event);
    slot.write_armed = true;
  }

  void retry_later(std::size_t index) {
    ++result_.retries;
    slots_[index].connection.reset();
    retries_.emplace_back(steady_ns() + kRetryDelayNs, index);
  }

  // A connection broke: before its ADD was sent it can start over; after, the counter may
  // already hold its 1, so the storm cannot be completed honestly.
  void broken(std::size_t index) {
    const Stage stage = slots_[index].stage;
    if (stage == Stage::connecting || stage == Stage::handshaking) {
      retry_later(index);
      return;
    }
    result_.failure = "connection " + std::to_string(index) + " broke after its ADD was sent";
  }

  void handle(std::size_t index, std::uint32_t events) {
    auto& slot = slots_[index];
    if (!slot.connection.open()) {
      return;
    }
    if (slot.stage == Stage::connecting) {
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(slot.connection.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        retry_later(index);
        return;
      }
      if ((events & EPOLLOUT) == 0 && (events & (EPOLLERR | EPOLLHUP)) == 0) {
        return;
      }
      slot.stage = Stage::handshaking;
    }
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
      const std::int64_t now = steady_ns();
      const bool ok =
          slot.connection.receive(scratch_, [&](const Reply& reply) { advance(slot, reply, now); });
      if (!ok) {
        broken(index);
        return;
      }
    }
    if (!slot.connection.flush()) {
      broken(index);
      return;
    }
    const bool wanted = slot.connection.wants_write();
    if (wanted != slot.write_armed) {
      epoll_event event{};
      event.events = wanted ? EPOLLIN | EPOLLOUT : EPOLLIN;
      event.data.u64 = index;
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, slot.connection.fd(), &event);
      slot.write_armed = wanted;
    }
  }

  void advance(StormSlot& slot, const Reply& reply, std::int64_t now) {
    const double since_start = static_cast<double>(now - started_ns_) / 1e9;
    switch (reply.kind) {
      case ReplyKind::echo:
        ++connected_;
        result_.connected_seconds = std::max(result_.connected_seconds, since_start);
        slot.connection.output() += add_count_;
        slot.connection.expect(ReplyKind::counter, now);
        slot.stage = Stage::adding;
        break;
      case ReplyKind::counter:
        if (reply.number == static_cast<std::int64_t>(slots_.size())) {
          slot.connection.output() += set_go_;
        }
        slot.connection.output() += wait_go_;
        slot.connection.expect(ReplyKind::wait_status, now);
        slot.stage = Stage::waiting;
        break;
      case ReplyKind::wait_status:
        ++woken_;
        result_.woken_seconds = std::max(result_.woken_seconds, since_start);
        slot.stage = Stage::done;
        break;
      case ReplyKind::value:
        break;  // never requested in a storm
    }
  }

  const StormOptions& options_;
  OwnedFd epoll_;
  std::vector<StormSlot> slots_;
  std::vector<std::uint8_t> scratch_;
  std::array<epoll_event, kMaxEventsPerWait> events_{};
  std::deque<std::pair<std::int64_t, std::size_t>> retries_;  // (due, slot), due ascending
  // The requests every connection sends, encoded once.
  const std::string add_count_;
  const std::string set_go_;
  const std::string wait_go_;
  std::int64_t started_ns_ = 0;
  std::size_t connected_ = 0;
  std::size_t woken_ = 0;
  StormResult result_;
};

}  // namespace

StormResult run_storm(const StormOptions& options) {
  return Storm(options).run();
}

}  // namespace ddprun::bench::store
