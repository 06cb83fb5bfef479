#pragma once
// One client connection of the store server: reassembles requests from the byte stream,
// enforces the handshake and the limits, hands requests to the hub and writes replies.
// Lives on the server's single event-loop thread.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/store/asio.hpp"
#include "rendezvous/store/auth_gate.hpp"
#include "rendezvous/store/request.hpp"
#include "rendezvous/store/store_state.hpp"

namespace ddprun::rendezvous::store {

class MemoryBudget;
class StoreConnection;
struct StoreLimits;

// What a connection needs from its server.
class ConnectionHub {
 public:
  virtual ~ConnectionHub() = default;
  // Applies a request; an error means the connection must be closed for that reason.
  virtual std::optional<std::string> dispatch(ConnectionId from, Request& request) = 0;
  virtual void connection_closed(ConnectionId id) = 0;
  virtual void log_violation(const std::string& peer, const std::string& reason) = 0;
  // What a connection's buffers are charged to: the agents' budget once it proved the job
  // secret (or when there is none), else the budget of everyone else.
  virtual MemoryBudget& budget(bool trusted) = 0;
  // With a job secret, a connection leaves its opening (store_server.hpp) either way:
  // it made a request without the proof (false: no room for another such client, it closes),
  // or it proved the secret.
  virtual bool admit_guest(ConnectionId id) = 0;
  virtual void admit_agent(ConnectionId id) = 0;
  // With a job secret, a client without the proof that made requests arms its next read
  // through the server, which arms a few such reads per trip through the event loop: a
  // stranger streaming large values then delays an agent's request by a few reads, not by one
  // read of every such client.
  virtual void defer_read(const std::shared_ptr<StoreConnection>& connection) = 0;
  virtual const StoreLimits& limits() const = 0;
  virtual WireGeneration legacy_generation() const = 0;
  // The job secret; empty: none, every connection may touch every key.
  virtual std::string_view secret() const = 0;
  // A scratch buffer for reads, shared by every connection of the loop.
  virtual std::span<std::uint8_t> read_buffer() = 0;
};

class StoreConnection : public std::enable_shared_from_this<StoreConnection> {
 public:
  StoreConnection(boost::asio::ip::tcp::socket socket, ConnectionId id, ConnectionHub& hub);
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;
  ~StoreConnection();

  void start();
  // Queues bytes for the client; flush() sends them.
  void queue_output(std::string_view bytes);
  void flush();
  // Closes without telling the hub (used when the server shuts down).
  void abandon();
  // Closes, telling the hub, for a reason the server found (a deadline, a limit).
  void expel(const std::string& reason) { close(reason); }
  // The server's turn for a read deferred by defer_read().
  void arm_deferred_read();

 private:
  // Waits for input: at once, or through the server's turns for reads_deferred() connections.
  void arm_read();
  void arm_read_now();
  bool reads_deferred() const { return gate_.requires_secret() && !trusted() && opened_; }
  void on_received(std::size_t received);
  // Buffers or decodes bytes just read; false when that closed the connection.
  bool consume(std::span<const std::uint8_t> bytes);
  // Decodes and dispatches every complete request at the front of `bytes`; returns how many
  // bytes were used, or nullopt when the connection was closed.
  std::optional<std::size_t> process(std::span<const std::uint8_t> bytes);
  void keep_unprocessed(std::span<const std::uint8_t> rest);
  // AUTH_HELLO and AUTH_PROOF (job_auth.hpp); false when that closed the connection.
  bool answer_auth(const Request& request);
  // A request other than the opening's (VALIDATE, PING, AUTH_*) on a connection without the
  // proof: it becomes a guest, if the hub has room; false when that closed the connection.
  bool leave_opening();
  // Moves what this connection holds to the agents' budget once it proved the secret.
  bool become_trusted();
  bool trusted() const { return gate_.authenticated() || !gate_.requires_secret(); }
  MemoryBudget& budget() { return hub_.budget(trusted()); }
  void start_async_write();
  bool output_backlogged() const;
  void close(const std::string& violation);

  // Asio (Boost 1.74) re-arms a socket with epoll_ctl() for every async_wait. An
  // async_read_some instead tries one recv() first, cheaper, and done outright when the next
  // request is already there, and otherwise just queues the read. So each connection waits
  // for input with a read into this small buffer of its own; a request that does not fit
  // continues in the hub's shared buffer.
  static constexpr std::size_t kFirstReadBytes = 512;

  boost::asio::ip::tcp::socket socket_;
  ConnectionId id_;
  ConnectionHub& hub_;
  std::string peer_;
  std::optional<WireGeneration> generation_;  // known once the first bytes arrived
  bool validated_ = false;                    // G2 only: VALIDATE was received
  bool opened_ = false;                       // made a request beyond the opening's
  AuthGate gate_;                             // the job secret: challenge, proof, refusals
  std::vector<std::uint8_t> input_;           // bytes of a request still arriving
  std::size_t input_needed_ = 0;              // do not decode again before this many
  std::size_t input_charged_ = 0;             // budget held for input_
  std::string pending_output_;                // queued, not yet handed to the socket
  std::string writing_;                       // handed to an async write in flight
  std::size_t output_charged_ = 0;            // budget held for both output buffers
  bool write_in_flight_ = false;
  bool read_armed_ = false;
  bool read_deferred_ = false;  // waiting for the server's turn (defer_read)
  bool closed_ = false;

  // The target of the pending read; not charged to the budget (max_connections x 512 bytes).
  std::array<std::uint8_t, kFirstReadBytes> first_read_{};
};

}  // namespace ddprun::rendezvous::store
