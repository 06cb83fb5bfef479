#pragma once
// Incremental, bounded decoding of one request from the bytes a connection has buffered.
// Pure: no I/O. A request split across reads yields need_more and is decoded again, from
// its first byte, once more bytes arrived (min_bytes says how many it needs at least), so
// the caller keeps no parse state. Every length and count is checked against the limits
// right after it is read, before anything is allocated.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rendezvous/store/request.hpp"
#include "rendezvous/store/store_limits.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::store {

enum class DecodeStatus : std::uint8_t { complete, need_more, invalid };

struct DecodeResult {
  DecodeStatus status = DecodeStatus::need_more;
  Request request;            // complete only
  std::size_t consumed = 0;   // complete: bytes the request took
  std::size_t min_bytes = 0;  // need_more: the request is at least this long
  std::string error;          // invalid: what was wrong, naming the value and the limit
  // need_more: the command, and its first key once all of it arrived (a view into the input),
  // so that a request can be refused before the rest of it (a value) is buffered.
  std::optional<std::string_view> first_key;
};

DecodeResult decode_request(std::span<const std::uint8_t> input, WireGeneration generation,
                            const StoreLimits& limits);

// Which generation a new connection speaks, from its first bytes: G2 opens with VALIDATE
// (00 CE F7 85 3C); anything else is the legacy generation the server is set to (G0 or G1).
// nullopt: too few bytes to tell yet.
std::optional<WireGeneration> detect_generation(std::span<const std::uint8_t> first_bytes,
                                                WireGeneration legacy);

}  // namespace ddprun::rendezvous::store
