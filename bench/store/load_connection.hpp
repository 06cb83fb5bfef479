#pragma once
// One client connection of the load generator: a non-blocking TCP socket, the requests queued
// for it, and the replies it still expects, in order (the protocol answers in request order
// and replies carry no opcode, so the expected shapes are the parse state).
// Threading: used by one thread. Errors: I/O failures and malformed replies are reported as
// `false` results; the caller decides whether to reconnect or give up.

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/owned_fd.hpp"
#include "rendezvous/backends/store_kv/store_kv_requests.hpp"
#include "rendezvous/store/wire_codec.hpp"

namespace ddprun::bench::store {

namespace wire = rendezvous::wire;
using agent::OwnedFd;

// The G2 requests the generator sends, encoded as ddprun's own store client encodes them.
inline const rendezvous::backends::StoreKvRequests kG2Requests(
    rendezvous::store::WireGeneration::g2);

// What a reply looks like on the wire, as the client must know it (replies carry no opcode).
enum class ReplyKind : std::uint8_t {
  echo,         // PING: the u32 nonce back
  value,        // GET: u64 length, then the bytes
  counter,      // ADD: the new value as i64
  wait_status,  // WAIT: one byte, STOP_WAITING
};

// One complete reply, as parsed.
struct Reply {
  ReplyKind kind = ReplyKind::echo;
  std::int64_t number = 0;   // echo: the nonce; counter: the value; value: its length
  std::int64_t sent_ns = 0;  // when the request was queued (steady clock)
};

class LoadConnection {
 public:
  // Replies longer than this are treated as a broken stream (the generator never stores more).
  static constexpr std::size_t kMaxValueBytes = 1 << 20;

  LoadConnection() = default;
  explicit LoadConnection(OwnedFd socket) : socket_(std::move(socket)) {}

  int fd() const { return socket_.get(); }
  bool open() const { return static_cast<bool>(socket_); }
  // Closes with a reset (SO_LINGER 0), so thousands of closed connections leave no TIME_WAIT
  // entries behind to exhaust loopback ports in the next run.
  void reset();

  // The buffer requests are appended to (kG2Requests encodes them); flush() sends it.
  std::string& output() { return output_; }
  // Records that a reply of `kind` is due for a request queued at `now_ns` (steady clock).
  void expect(ReplyKind kind, std::int64_t now_ns) { pending_.push_back({kind, 0, now_ns}); }
  std::size_t outstanding() const { return pending_.size(); }

  // Sends what is queued, as far as the socket takes it. False: the connection failed.
  bool flush();
  bool wants_write() const { return sent_ < output_.size(); }

  // Reads what has arrived (one recv into `scratch`) and hands each complete reply to
  // `on_reply`. False: the peer closed, the socket failed, or a reply was malformed.
  template <typename OnReply>
  bool receive(std::span<std::uint8_t> scratch, OnReply&& on_reply);

 private:
  enum class ReadStatus : std::uint8_t { ok, would_block, closed };
  ReadStatus read_into(std::span<std::uint8_t> scratch, std::size_t& received);
  // Parses complete replies from the front of `bytes`; returns the bytes used, or
  // std::string::npos when the stream is malformed or unexpected.
  template <typename OnReply>
  std::size_t parse(std::span<const std::uint8_t> bytes, OnReply& on_reply);

  OwnedFd socket_;
  std::string output_;
  std::size_t sent_ = 0;
  std::vector<std::uint8_t> input_;  // an incomplete reply carried over between reads
  std::deque<Reply> pending_;        // replies expected, oldest first
};

// A non-blocking TCP socket with TCP_NODELAY and SO_LINGER 0; connect() already started.
// Returns an invalid descriptor and sets `error` (errno) when it could not be started.
OwnedFd start_connect(const sockaddr_in& server, int& error);

template <typename OnReply>
bool LoadConnection::receive(std::span<std::uint8_t> scratch, OnReply&& on_reply) {
  std::size_t received = 0;
  const auto status = read_into(scratch, received);
  if (status == ReadStatus::would_block) {
    return true;
  }
  if (status == ReadStatus::closed) {
    return false;
  }
  std::span<const std::uint8_t> bytes = scratch.first(received);
  if (!input_.empty()) {
    input_.insert(input_.end(), bytes.begin(), bytes.end());
    bytes = input_;
  }
  const std::size_t used = parse(bytes, on_reply);
  if (used == std::string::npos) {
    return false;
  }
  if (input_.empty()) {
    input_.assign(bytes.begin() + static_cast<std::ptrdiff_t>(used), bytes.end());
  } else {
    input_.erase(input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(used));
  }
  return true;
}

template <typename OnReply>
std::size_t LoadConnection::parse(std::span<const std::uint8_t> bytes, OnReply& on_reply) {
  std::size_t offset = 0;
  while (offset < bytes.size()) {
    if (pending_.empty()) {
      return std::string::npos;  // bytes nobody asked for
    }
    Reply reply = pending_.front();
    const auto* at = bytes.data() + offset;
    const std::size_t left = bytes.size() - offset;
    std::size_t length = 0;
    switch (reply.kind) {
      case ReplyKind::echo:
        length = 4;
        if (left >= length) {
          reply.number = wire::load_u32(at);
        }
        break;
      case ReplyKind::counter:
        length = 8;
        if (left >= length) {
          reply.number = static_cast<std::int64_t>(wire::load_u64(at));
        }
        break;
      case ReplyKind::wait_status:
        length = 1;
        if (left >= length && at[0] != rendezvous::store::kStopWaiting) {
          return std::string::npos;
        }
        break;
      case ReplyKind::value:
        if (left < 8) {
          return offset;
        }
        if (wire::load_u64(at) > kMaxValueBytes) {
          return std::string::npos;
        }
        reply.number = static_cast<std::int64_t>(wire::load_u64(at));
        length = 8 + static_cast<std::size_t>(reply.number);
        break;
    }
    if (left < length) {
      return offset;
    }
    offset += length;
    pending_.pop_front();
    on_reply(reply);
  }
  return offset;
}

}  // namespace ddprun::bench::store
