#include "rendezvous/store/request_decoder.hpp"

#include <array>
#include <optional>
#include <string_view>

#include "rendezvous/store/job_auth.hpp"
#include "rendezvous/store/wire_codec.hpp"

namespace ddprun::rendezvous::store {
namespace {

// Reads fields from the front of the buffered bytes. A read that runs past the end records
// how many bytes the request needs at least and fails; a field that breaks a limit records
// the error and fails. With materialize=false nothing is copied, so a request that is still
// arriving is only scanned.
class FieldReader {
 public:
  FieldReader(std::span<const std::uint8_t> input, const StoreLimits& limits, bool materialize)
      : input_(input), limits_(limits), materialize_(materialize) {}

  // A little-endian unsigned integer of the field's size.
  template <class Unsigned>
  bool read_uint(Unsigned& value) {
    if (!need(sizeof(Unsigned))) {
      return false;
    }
    value = wire::load_le<Unsigned>(input_.data() + position_);
    position_ += sizeof(Unsigned);
    return true;
  }

  bool read_i64(std::int64_t& value) {
    std::uint64_t raw = 0;
    if (!read_uint(raw)) {
      return false;
    }
    value = static_cast<std::int64_t>(raw);
    return true;
  }

  bool read_key(std::vector<std::string>& keys) {
    const std::size_t start = position_;
    if (!read_string(keys, limits_.max_key_bytes, "key")) {
      return false;
    }
    if (!first_key_) {
      // The key's bytes follow its u64 length.
      const std::size_t offset = start + sizeof(std::uint64_t);
      first_key_ = std::string_view(reinterpret_cast<const char*>(input_.data() + offset),
                                    position_ - offset);
    }
    return true;
  }

  bool read_value(std::vector<std::string>& values) {
    return read_string(values, limits_.max_value_bytes, "value");
  }

  // A u64 count of keys, checked against max_keys_per_request.
  bool read_count(std::uint64_t& count) {
    if (!read_uint(count)) {
      return false;
    }
    if (count > limits_.max_keys_per_request) {
      return fail("key count " + std::to_string(count) + " exceeds the limit of " +
                  std::to_string(limits_.max_keys_per_request));
    }
    return true;
  }

  // A field of exactly `size` bytes (no length on the wire).
  bool read_fixed(std::vector<std::string>& out, std::size_t size) {
    if (!need(size)) {
      return false;
    }
    if (materialize_) {
      out.emplace_back(reinterpret_cast<const char*>(input_.data() + position_), size);
    }
    position_ += size;
    return true;
  }

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  std::size_t position() const { return position_; }
  std::size_t min_bytes() const { return min_bytes_; }
  std::optional<std::string_view> first_key() const { return first_key_; }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

 private:
  bool need(std::size_t bytes) {
    if (input_.size() - position_ < bytes) {
      min_bytes_ = position_ + bytes;
      return false;
    }
    return true;
  }

  bool read_string(std::vector<std::string>& out, std::size_t limit, std::string_view what) {
    std::uint64_t length = 0;
    if (!read_uint(length)) {
      return false;
    }
    if (length > limit) {
      return fail(std::string(what) + " length " + std::to_string(length) +
                  " exceeds the limit of " + std::to_string(limit));
    }
    return read_fixed(out, static_cast<std::size_t>(length));
  }

  std::span<const std::uint8_t> input_;
  const StoreLimits& limits_;
  bool materialize_;
  std::size_t position_ = 0;
  std::size_t min_bytes_ = 0;
  std::string error_;
  std::optional<std::string_view> first_key_;  // into input_, once read
};

// Reads the body of one command; false when bytes are missing or a field is invalid.
bool read_body(FieldReader& reader, Request& request) {
  switch (request.command) {
    case Command::validate:
    case Command::ping:
      return reader.read_uint(request.word);
    case Command::set:
    case Command::append:
    case Command::queue_push:
      return reader.read_key(request.keys) && reader.read_value(request.values);
    case Command::compare_set:
      return reader.read_key(request.keys) && reader.read_value(request.values) &&
             reader.read_value(request.values);
    case Command::get:
    case Command::watch_key:
    case Command::delete_key:
    case Command::queue_pop:
    case Command::queue_len:
      return reader.read_key(request.keys);
    case Command::add:
    case Command::barrier:
      return reader.read_key(request.keys) && reader.read_i64(request.integer);
    case Command::check:
    case Command::wait:
    case Command::multi_get: {
      std::uint64_t count = 0;
      if (!reader.read_count(count)) {
        return false;
      }
      for (std::uint64_t i = 0; i < count; ++i) {
        if (!reader.read_key(request.keys)) {
          return false;
        }
      }
      return true;
    }
    case Command::multi_set: {
      std::uint64_t count = 0;
      if (!reader.read_count(count)) {
        return false;
      }
      for (std::uint64_t i = 0; i < count; ++i) {
        if (!reader.read_key(request.keys) || !reader.read_value(request.values)) {
          return false;
        }
      }
      return true;
    }
    case Command::auth_hello: {
      std::uint8_t version = 0;
      if (!reader.read_uint(version)) {
        return false;
      }
      if (version != kAuthVersion) {
        return reader.fail("version " + std::to_string(version) + " is not " +
                           std::to_string(kAuthVersion));
      }
      request.word = version;
      return reader.read_fixed(request.values, kAuthNonceBytes);  // the agent's nonce
    }
    case Command::auth_proof:
      return reader.read_fixed(request.values, kAuthProofBytes);
    case Command::get_num_keys:
    case Command::cancel_wait:
    case Command::list_keys:
      return true;
  }
  return reader.fail("unhandled command");
}

DecodeResult decode_pass(std::span<const std::uint8_t> input, WireGeneration generation,
                         const StoreLimits& limits, bool materialize) {
  DecodeResult result;
  FieldReader reader(input, limits, materialize);
  std::uint8_t opcode = 0;
  if (!reader.read_uint(opcode)) {
    result.min_bytes = 1;
    return result;
  }
  const auto command = command_for_opcode(generation, opcode);
  if (!command) {
    result.status = DecodeStatus::invalid;
    result.error = "unknown opcode " + std::to_string(opcode) + " for " +
                   std::string(generation_name(generation));
    return result;
  }
  result.request.command = *command;
  if (read_body(reader, result.request)) {
    result.status = DecodeStatus::complete;
    result.consumed = reader.position();
  } else if (reader.failed()) {
    result.status = DecodeStatus::invalid;
    result.error = std::string(command_name(*command)) + ": " + reader.error();
  } else {
    result.min_bytes = reader.min_bytes();
    result.first_key = reader.first_key();
  }
  return result;
}

}  // namespace

DecodeResult decode_request(std::span<const std::uint8_t> input, WireGeneration generation,
                            const StoreLimits& limits) {
  auto scanned = decode_pass(input, generation, limits, false);
  if (scanned.status != DecodeStatus::complete) {
    return scanned;
  }
  return decode_pass(input, generation, limits, true);
}

std::optional<WireGeneration> detect_generation(std::span<const std::uint8_t> first_bytes,
                                                WireGeneration legacy) {
  constexpr std::array<std::uint8_t, 5> kValidate{0x00, 0xCE, 0xF7, 0x85, 0x3C};
  const std::size_t available = std::min(first_bytes.size(), kValidate.size());
  for (std::size_t i = 0; i < available; ++i) {
    if (first_bytes[i] != kValidate[i]) {
      return legacy;
    }
  }
  if (available < kValidate.size()) {
    return std::nullopt;
  }
  return WireGeneration::g2;
}

}  // namespace ddprun::rendezvous::store
