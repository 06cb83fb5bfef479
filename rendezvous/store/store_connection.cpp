#include "rendezvous/store/store_connection.hpp"

#include <algorithm>
#include <utility>

#include "common/random.hpp"
#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/memory_budget.hpp"
#include "rendezvous/store/request_decoder.hpp"
#include "rendezvous/store/store_limits.hpp"

namespace ddprun::rendezvous::store {
namespace {

// Stop reading from a client whose replies pile up unread, until they drain.
constexpr std::size_t kOutputHighWater = 16 * 1024 * 1024;
// Reads per readiness event, so one busy client cannot starve the others. With a job secret, a
// connection that did not prove it reads once per event: a stranger streaming large values
// holds the event loop, and so the agents, for one read at a time.
constexpr int kReadsPerEvent = 4;
constexpr int kUntrustedReadsPerEvent = 1;

std::string describe_peer(const boost::asio::ip::tcp::socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  if (error) {
    return "unknown peer";
  }
  const auto address = endpoint.address();
  const std::string host = address.is_v6() && address.to_v6().is_v4_mapped()
                               ? address.to_v6().to_v4().to_string()
                               : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

// Whether a request ends a connection's opening: anything but the handshake (VALIDATE, PING)
// and the job secret's messages.
bool opens(Command command) {
  return command != Command::validate && command != Command::ping &&
         command != Command::auth_hello && command != Command::auth_proof;
}

}  // namespace

StoreConnection::StoreConnection(boost::asio::ip::tcp::socket socket, ConnectionId id,
                                 ConnectionHub& hub)
    : socket_(std::move(socket)),
      id_(id),
      hub_(hub),
      peer_(describe_peer(socket_)),
      gate_(hub.secret()) {}

StoreConnection::~StoreConnection() {
  budget().release(input_charged_ + output_charged_);
}

void StoreConnection::start() {
  boost::system::error_code ignored;
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
  socket_.non_blocking(true, ignored);
  arm_read();
}

void StoreConnection::arm_read() {
  if (read_armed_ || read_deferred_ || closed_) {
    return;
  }
  if (reads_deferred()) {
    // A client without the proof that made requests waits its turn with the others like it:
    // the server arms a few of them per trip through the event loop (store_server.cpp).
    read_deferred_ = true;
    hub_.defer_read(shared_from_this());
    return;
  }
  arm_read_now();
}

void StoreConnection::arm_deferred_read() {
  read_deferred_ = false;
  arm_read_now();
}

void StoreConnection::arm_read_now() {
  if (read_armed_ || closed_) {
    return;
  }
  read_armed_ = true;
  socket_.async_read_some(
      boost::asio::buffer(first_read_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t received) {
        self->read_armed_ = false;
        if (self->closed_) {
          return;
        }
        if (error) {
          self->close("");  // the peer went away (or reset); not a violation
          return;
        }
        self->on_received(received);
      });
}

void StoreConnection::on_received(std::size_t received) {
  if (!consume(std::span<const std::uint8_t>(first_read_).first(received))) {
    return;
  }
  // A full first read may have left more behind: read on, into the shared buffer.
  const auto buffer = hub_.read_buffer();
  bool more = received == first_read_.size();
  const int reads = trusted() ? kReadsPerEvent : kUntrustedReadsPerEvent;
  for (int round = 1; more && round < reads && !closed_; ++round) {
    boost::system::error_code error;
    const std::size_t got =
        socket_.read_some(boost::asio::buffer(buffer.data(), buffer.size()), error);
    if (error == boost::asio::error::would_block) {
      break;
    }
    if (error) {
      close("");
      return;
    }
    if (!consume(buffer.first(got))) {
      return;
    }
    more = got == buffer.size();
  }
  if (closed_) {
    return;
  }
  flush();
  if (!output_backlogged()) {
    arm_read();
  }
}

bool StoreConnection::consume(std::span<const std::uint8_t> bytes) {
  if (input_.empty()) {
    // Fast path: decode straight from where the bytes were read; keep only an incomplete tail.
    const auto used = process(bytes);
    if (!used) {
      return false;
    }
    keep_unprocessed(bytes.subspan(*used));
    return !closed_;
  }
  if (!budget().try_reserve(bytes.size())) {
    close("buffered request bytes exceed the memory budget");
    return false;
  }
  input_charged_ += bytes.size();
  input_.insert(input_.end(), bytes.begin(), bytes.end());
  if (input_.size() >= input_needed_) {
    const auto used = process(input_);
    if (!used) {
      return false;
    }
    input_.erase(input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(*used));
    keep_unprocessed({});
  }
  return !closed_;
}

void StoreConnection::keep_unprocessed(std::span<const std::uint8_t> rest) {
  if (!rest.empty()) {
    if (!budget().try_reserve(rest.size())) {
      close("buffered request bytes exceed the memory budget");
      return;
    }
    input_charged_ += rest.size();
    input_.assign(rest.begin(), rest.end());
    return;
  }
  // input_ now holds exactly the unprocessed bytes; hand back what is no longer buffered.
  if (input_charged_ > input_.size()) {
    budget().release(input_charged_ - input_.size());
    input_charged_ = input_.size();
  }
  if (input_.empty()) {
    input_.shrink_to_fit();  // idle connections hold no buffer
  }
}

std::optional<std::size_t> StoreConnection::process(std::span<const std::uint8_t> bytes) {
  std::size_t offset = 0;
  input_needed_ = 0;
  while (offset < bytes.size()) {
    const auto rest = bytes.subspan(offset);
    if (!generation_) {
      generation_ = detect_generation(rest, hub_.legacy_generation());
      if (!generation_) {
        input_needed_ = 5;
        return offset;
      }
    }
    auto result = decode_request(rest, *generation_, hub_.limits());
    if (result.status == DecodeStatus::need_more) {
      // A refused request is refused before its value is buffered.
      if (const auto refusal = gate_.refusal(result.request.command, result.first_key)) {
        close(*refusal);
        return std::nullopt;
      }
      // A request still arriving ends the opening as one that arrived would.
      if (!opened_ && opens(result.request.command) && !leave_opening()) {
        return std::nullopt;
      }
      input_needed_ = result.min_bytes;
      return offset;
    }
    if (result.status == DecodeStatus::invalid) {
      close(result.error);
      return std::nullopt;
    }
    offset += result.consumed;
    if (*generation_ == WireGeneration::g2) {
      if (!validated_) {
        if (result.request.command != Command::validate ||
            result.request.word != kValidationMagic) {
          close("the first message is not VALIDATE with the expected magic");
          return std::nullopt;
        }
        validated_ = true;
        continue;
      }
      if (result.request.command == Command::validate) {
        close("VALIDATE after the handshake");
        return std::nullopt;
      }
    }
    if (result.request.command == Command::auth_hello ||
        result.request.command == Command::auth_proof) {
      // The gate changes before the next request is decoded: one pipelined behind AUTH_PROOF
      // is judged by its verdict, and a refusal stops here, before serving it.
      if (!answer_auth(result.request)) {
        return std::nullopt;
      }
      continue;
    }
    if (const auto refusal = gate_.refusal(result.request)) {
      close(*refusal);
      return std::nullopt;
    }
    if (!opened_ && opens(result.request.command) && !leave_opening()) {
      return std::nullopt;
    }
    result.request.hide_agent_keys = !gate_.sees_agent_keys();
    if (const auto error = hub_.dispatch(id_, result.request)) {
      close(*error);
      return std::nullopt;
    }
    if (closed_) {
      return std::nullopt;
    }
  }
  return offset;
}

bool StoreConnection::answer_auth(const Request& request) {
  const bool was_trusted = trusted();
  const bool challenge = request.command == Command::auth_hello && gate_.requires_secret();
  std::string nonce;
  try {
    nonce = challenge ? common::random_bytes(kAuthNonceBytes) : std::string();
  } catch (const std::exception& error) {
    close(error.what());
    return false;
  }
  auto answer = gate_.answer(request, std::move(nonce));
  if (!was_trusted && trusted() && !become_trusted()) {
    return false;
  }
  if (!answer.reply.empty()) {
    queue_output(answer.reply);
  }
  if (answer.close_reason) {
    flush();  // a refusal's verdict goes out before the connection closes
    close(*answer.close_reason);
    return false;
  }
  return !closed_;
}

bool StoreConnection::leave_opening() {
  opened_ = true;
  if (trusted()) {
    return true;
  }
  if (!hub_.admit_guest(id_)) {
    close("the limit of " + std::to_string(hub_.limits().max_guest_connections) +
          " connections without the job secret is reached");
    return false;
  }
  return true;
}

bool StoreConnection::become_trusted() {
  const std::size_t held = input_charged_ + output_charged_;
  hub_.budget(false).release(held);
  opened_ = true;
  hub_.admit_agent(id_);
  if (!hub_.budget(true).try_reserve(held)) {
    input_charged_ = 0;
    output_charged_ = 0;
    close("buffered bytes exceed the memory budget");
    return false;
  }
  return true;
}

void StoreConnection::queue_output(std::string_view bytes) {
  if (closed_) {
    return;
  }
  if (!budget().try_reserve(bytes.size())) {
    close("unread replies exceed the memory budget");
    return;
  }
  output_charged_ += bytes.size();
  pending_output_.append(bytes);
}

bool StoreConnection::output_backlogged() const {
  return pending_output_.size() + writing_.size() > kOutputHighWater;
}

void StoreConnection::flush() {
  if (closed_ || write_in_flight_ || pending_output_.empty()) {
    return;
  }
  // Most replies are a few bytes: try to send them now, and fall back to an asynchronous
  // write only for what the socket does not take.
  boost::system::error_code error;
  const std::size_t sent = socket_.write_some(boost::asio::buffer(pending_output_), error);
  if (error && error != boost::asio::error::would_block) {
    close("");
    return;
  }
  if (!error) {
    budget().release(sent);
    output_charged_ -= sent;
    pending_output_.erase(0, sent);
  }
  if (!pending_output_.empty()) {
    start_async_write();
  }
}

void StoreConnection::start_async_write() {
  writing_ = std::move(pending_output_);
  pending_output_.clear();
  write_in_flight_ = true;
  boost::asio::async_write(
      socket_, boost::asio::buffer(writing_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
        self->write_in_flight_ = false;
        self->budget().release(self->writing_.size());
        self->output_charged_ -= self->writing_.size();
        self->writing_.clear();
        self->writing_.shrink_to_fit();
        if (self->closed_) {
          return;
        }
        if (error) {
          self->close("");
          return;
        }
        self->flush();
        if (!self->output_backlogged()) {
          self->arm_read();
        }
      });
}

void StoreConnection::close(const std::string& violation) {
  if (closed_) {
    return;
  }
  closed_ = true;
  if (!violation.empty()) {
    hub_.log_violation(peer_, violation);
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  budget().release(input_charged_);
  input_charged_ = 0;
  input_.clear();
  input_.shrink_to_fit();
  hub_.connection_closed(id_);
}

void StoreConnection::abandon() {
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

}  // namespace ddprun::rendezvous::store
