// Threading: one MixWorker per thread, each owning its connections and epoll set; the calling
// thread only sets up the phases and samples CPU at the window's edges.

#include "bench/store/mix_load.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <latch>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/store/load_connection.hpp"
#include "bench/store/process_cpu.hpp"
#include "bench/store/steady_ns.hpp"

namespace ddprun::bench::store {
namespace {

constexpr std::size_t kScratchBytes = 64 * 1024;
constexpr int kMaxEventsPerWait = 1024;
// Each connection rewrites this many keys in turn, so the store's size stays bounded.
constexpr std::uint64_t kKeysPerConnection = 64;
constexpr std::size_t kValueBytes = 64;
constexpr std::string_view kCounterKey = "mix/counter";

struct MixSlot {
  LoadConnection connection;
  std::string key_prefix;  // "mix/<connection>/"
  std::uint64_t next = 0;  // position in the SET+GET, ADD cycle
  bool write_armed = false;
};

class MixWorker {
 public:
  MixWorker(const MixOptions& options, int first, int stride)
      : options_(options),
        epoll_(::epoll_create1(EPOLL_CLOEXEC)),
        scratch_(kScratchBytes),
        value_(kValueBytes, 'v'),
        add_counter_(kG2Requests.add(kCounterKey, 1)) {
    if (!epoll_) {
      throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
    }
    for (int index = first; index < options.connections; index += stride) {
      slots_.push_back({LoadConnection(), "mix/" + std::to_string(index) + "/"});
    }
    latencies_ns_.reserve(1 << 20);
  }

  // Connects every slot and completes its VALIDATE + PING; throws naming what failed.
  void connect_all(std::int64_t deadline_ns) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      int error = 0;
      OwnedFd socket = start_connect(options_.server, error);
      if (!socket) {
        throw std::runtime_error(std::string("connect: ") + std::strerror(error));
      }
      auto& slot = slots_[i];
      slot.connection = LoadConnection(std::move(socket));
      slot.connection.output() += kG2Requests.validate_and_ping(static_cast<std::uint32_t>(i));
      slot.connection.expect(ReplyKind::echo, steady_ns());
      watch(i, EPOLLIN | EPOLLOUT, EPOLL_CTL_ADD);
      slot.write_armed = true;
    }
    std::size_t handshaken = 0;
    while (handshaken < slots_.size()) {
      const std::int64_t now = steady_ns();
      if (now >= deadline_ns) {
        throw std::runtime_error(std::to_string(slots_.size() - handshaken) +
                                 " connections did not complete the handshake in time");
      }
      const int count = ::epoll_wait(epoll_.get(), events_.data(), kMaxEventsPerWait,
                                     milliseconds_until(deadline_ns, now));
      for (int e = 0; e < count; ++e) {
        const auto index = static_cast<std::size_t>(events_[e].data.u64);
        auto& slot = slots_[index];
        const bool ok = slot.connection.receive(scratch_, [&](const Reply&) { ++handshaken; });
        if (!ok || !slot.connection.flush()) {
          throw std::runtime_error("a connection failed during the handshake");
        }
        update_write_interest(index);
      }
    }
  }

  // Runs the mix until end_ns, counting what is answered in [start_ns, end_ns).
  void run(std::int64_t start_ns, std::int64_t end_ns) {
    start_ns_ = start_ns;
    end_ns_ = end_ns;
    const std::int64_t now = steady_ns();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      for (int d = 0; d < options_.depth; ++d) {
        issue(slots_[i], now);
      }
      send(i);
    }
    while (true) {
      const std::int64_t waited_from = steady_ns();
      if (waited_from >= end_ns) {
        break;
      }
      const int count = ::epoll_wait(epoll_.get(), events_.data(), kMaxEventsPerWait,
                                     milliseconds_until(end_ns, waited_from));
      for (int e = 0; e < count; ++e) {
        const auto index = static_cast<std::size_t>(events_[e].data.u64);
        auto& slot = slots_[index];
        if (!slot.connection.open()) {
          continue;
        }
        if ((events_[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
          const std::int64_t arrived = steady_ns();
          const bool ok = slot.connection.receive(
              scratch_, [&](const Reply& reply) { complete(slot, reply, arrived); });
          if (!ok) {
            fail(index);
            continue;
          }
        }
        send(index);
      }
    }
  }

  std::uint64_t operations() const { return operations_; }
  int failed() const { return failed_; }
  std::vector<std::uint32_t>& latencies_ns() { return latencies_ns_; }

 private:
  static int milliseconds_until(std::int64_t deadline_ns, std::int64_t now_ns) {
    constexpr std::int64_t kNsPerMs = 1'000'000;
    return static_cast<int>(
        std::max<std::int64_t>(0, (deadline_ns - now_ns + kNsPerMs - 1) / kNsPerMs));
  }

  void watch(std::size_t index, std::uint32_t events, int operation) {
    epoll_event event{};
    event.events = events;
    event.data.u64 = index;
    if (::epoll_ctl(epoll_.get(), operation, slots_[index].connection.fd(), &event) != 0) {
      throw std::runtime_error(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  }

  void update_write_interest(std::size_t index) {
    auto& slot = slots_[index];
    const bool wanted = slot.connection.wants_write();
    if (wanted != slot.write_armed) {
      watch(index, wanted ? EPOLLIN | EPOLLOUT : EPOLLIN, EPOLL_CTL_MOD);
      slot.write_armed = wanted;
    }
  }

  void send(std::size_t index) {
    if (!slots_[index].connection.flush()) {
      fail(index);
      return;
    }
    update_write_interest(index);
  }

  void fail(std::size_t index) {
    ++failed_;
    slots_[index].connection.reset();  // also leaves the epoll set
  }

  void issue(MixSlot& slot, std::int64_t now) {
    auto& out = slot.connection.output();
    if (slot.next % 2 == 0) {
      std::array<char, 24> digits{};
      const auto end =
          std::to_chars(digits.begin(), digits.end(), (slot.next / 2) % kKeysPerConnection).ptr;
      key_ = slot.key_prefix;
      key_.append(digits.begin(), end);
      out += kG2Requests.set(key_, value_);
      out += kG2Requests.get(key_);
      slot.connection.expect(ReplyKind::value, now);
    } else {
      out += add_counter_;
      slot.connection.expect(ReplyKind::counter, now);
    }
    ++slot.next;
  }

  void complete(MixSlot& slot, const Reply& reply, std::int64_t arrived) {
    if (arrived >= start_ns_ && arrived < end_ns_) {
      operations_ += reply.kind == ReplyKind::value ? 2 : 1;  // the SET before the GET
      const auto latency = static_cast<std::uint64_t>(arrived - reply.sent_ns);
      latencies_ns_.push_back(static_cast<std::uint32_t>(
          std::min<std::uint64_t>(latency, std::numeric_limits<std::uint32_t>::max())));
    }
    if (arrived < end_ns_) {
      issue(slot, arrived);
    }
  }

  const MixOptions& options_;
  OwnedFd epoll_;
  std::vector<std::uint8_t> scratch_;
  std::array<epoll_event, kMaxEventsPerWait> events_{};
  std::vector<MixSlot> slots_;
  const std::string value_;
  const std::string add_counter_;
  std::string key_;  // reused by issue()
  std::int64_t start_ns_ = 0;
  std::int64_t end_ns_ = 0;
  std::uint64_t operations_ = 0;
  int failed_ = 0;
  std::vector<std::uint32_t> latencies_ns_;
};

double percentile_us(std::vector<std::uint32_t>& samples, double fraction) {
  if (samples.empty()) {
    return 0;
  }
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(index),
                   samples.end());
  return samples[index] / 1e3;
}

}  // namespace

MixResult run_mix(const MixOptions& options) {
  MixResult result;
  const int threads = std::max(1, std::min(options.threads, options.connections));
  std::vector<std::unique_ptr<MixWorker>> workers;
  for (int t = 0; t < threads; ++t) {
    workers.push_back(std::make_unique<MixWorker>(options, t, threads));
  }
  std::latch connected(threads + 1);
  std::latch go(1);
  std::int64_t start_ns = 0;  // written before go opens, read after
  std::int64_t end_ns = 0;
  std::vector<std::string> errors(static_cast<std::size_t>(threads));
  const std::int64_t setup_deadline =
      steady_ns() + std::chrono::nanoseconds(options.setup_limit).count();
  {
    std::vector<std::jthread> running;
    for (int t = 0; t < threads; ++t) {
      running.emplace_back([&, t] {
        auto& worker = *workers[static_cast<std::size_t>(t)];
        try {
          worker.connect_all(setup_deadline);
        } catch (const std::exception& error) {
          errors[static_cast<std::size_t>(t)] = error.what();
        }
        connected.arrive_and_wait();
        go.wait();
        if (errors[static_cast<std::size_t>(t)].empty() && end_ns > 0) {
          worker.run(start_ns, end_ns);
        }
      });
    }
    connected.arrive_and_wait();
    for (const auto& error : errors) {
      if (!error.empty() && result.failure.empty()) {
        result.failure = error;
      }
    }
    if (result.failure.empty()) {
      start_ns = steady_ns() + std::chrono::nanoseconds(options.warmup).count();
      end_ns = start_ns + std::chrono::nanoseconds(options.duration).count();
    }
    go.count_down();
    if (result.failure.empty()) {
      sleep_until_ns(start_ns);
      const auto server_before = process_cpu_seconds(options.server_pid);
      const auto self_before = process_cpu_seconds(::getpid());
      sleep_until_ns(end_ns);
      const auto server_after = process_cpu_seconds(options.server_pid);
      const auto self_after = process_cpu_seconds(::getpid());
      if (!server_before || !server_after) {
        result.failure = "cannot read the server's CPU time from /proc";
      } else {
        result.server_cpu_seconds = *server_after - *server_before;
        result.generator_cpu_seconds = self_after.value_or(0) - self_before.value_or(0);
      }
    }
  }  // joins the workers
  if (!result.failure.empty()) {
    return result;
  }
  std::vector<std::uint32_t> all;
  for (auto& worker : workers) {
    result.operations += worker->operations();
    result.failed_connections += worker->failed();
    all.insert(all.end(), worker->latencies_ns().begin(), worker->latencies_ns().end());
  }
  result.seconds = static_cast<double>(end_ns - start_ns) / 1e9;
  result.p50_us = percentile_us(all, 0.50);
  result.p99_us = percentile_us(all, 0.99);
  return result;
}

}  // namespace ddprun::bench::store
