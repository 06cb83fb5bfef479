#include "rendezvous/backends/store_kv/store_kv_requests.hpp"

#include <stdexcept>

#include "rendezvous/store/wire_codec.hpp"
#include "rendezvous/store/wire_protocol.hpp"

namespace ddprun::rendezvous::backends {
namespace {

using store::Command;

constexpr std::size_t kOpcodeBytes = 1;

std::string keyed(uint8_t opcode, std::string_view key, std::size_t extra_bytes) {
  std::string request;
  request.reserve(kOpcodeBytes + store::kLengthFieldBytes + key.size() + extra_bytes);
  wire::append_u8(request, opcode);
  wire::append_bytes(request, key);
  return request;
}

std::string keys_request(uint8_t opcode, const std::vector<std::string>& keys) {
  std::size_t size = kOpcodeBytes + store::kLengthFieldBytes;
  for (const auto& key : keys) {
    size += store::kLengthFieldBytes + key.size();
  }
  std::string request;
  request.reserve(size);
  wire::append_u8(request, opcode);
  wire::append_u64(request, keys.size());
  for (const auto& key : keys) {
    wire::append_bytes(request, key);
  }
  return request;
}

}  // namespace

uint8_t StoreKvRequests::opcode(Command command) const {
  const auto code = store::opcode_for_command(generation_, command);
  if (!code) {
    // StoreKv only asks for what the generation has; reaching this is a bug in StoreKv.
    throw std::logic_error(std::string(store::command_name(command)) + " does not exist in " +
                           std::string(store::generation_name(generation_)));
  }
  return *code;
}

std::string StoreKvRequests::set(std::string_view key, std::string_view value) const {
  auto request = keyed(opcode(Command::set), key, store::kLengthFieldBytes + value.size());
  wire::append_bytes(request, value);
  return request;
}

std::string StoreKvRequests::get(std::string_view key) const {
  return keyed(opcode(Command::get), key, 0);
}

std::string StoreKvRequests::add(std::string_view key, int64_t delta) const {
  auto request = keyed(opcode(Command::add), key, sizeof(delta));
  wire::append_i64(request, delta);
  return request;
}

std::string StoreKvRequests::compare_set(std::string_view key, std::string_view expected,
                                         std::string_view desired) const {
  auto request = keyed(opcode(Command::compare_set), key,
                       2 * store::kLengthFieldBytes + expected.size() + desired.size());
  wire::append_bytes(request, expected);
  wire::append_bytes(request, desired);
  return request;
}

std::string StoreKvRequests::append(std::string_view key, std::string_view value) const {
  auto request = keyed(opcode(Command::append), key, store::kLengthFieldBytes + value.size());
  wire::append_bytes(request, value);
  return request;
}

std::string StoreKvRequests::check(const std::vector<std::string>& keys) const {
  return keys_request(opcode(Command::check), keys);
}

std::string StoreKvRequests::wait(const std::vector<std::string>& keys) const {
  return keys_request(opcode(Command::wait), keys);
}

std::string StoreKvRequests::multi_get(const std::vector<std::string>& keys) const {
  return keys_request(opcode(Command::multi_get), keys);
}

std::string StoreKvRequests::multi_set(const std::vector<std::string>& keys,
                                       const std::vector<std::string>& values) const {
  return wire::key_value_pairs_request(opcode(Command::multi_set), keys, values);
}

std::string StoreKvRequests::cancel_wait() const {
  std::string request;
  wire::append_u8(request, opcode(Command::cancel_wait));
  return request;
}

std::string StoreKvRequests::validate_and_ping(uint32_t nonce) {
  const StoreKvRequests g2(store::WireGeneration::g2);
  std::string request;
  wire::append_u8(request, g2.opcode(Command::validate));
  wire::append_u32(request, store::kValidationMagic);
  wire::append_u8(request, g2.opcode(Command::ping));
  wire::append_u32(request, nonce);
  return request;
}

std::string StoreKvRequests::validate_and_count(std::size_t counts) {
  const StoreKvRequests g2(store::WireGeneration::g2);
  std::string request;
  wire::append_u8(request, g2.opcode(Command::validate));
  wire::append_u32(request, store::kValidationMagic);
  for (std::size_t i = 0; i < counts; ++i) {
    wire::append_u8(request, g2.opcode(Command::get_num_keys));
  }
  return request;
}

}  // namespace ddprun::rendezvous::backends
