#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written here so that the job secret's
// challenge-response needs no crypto library linked into ddprun. Pure: no I/O.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddprun::rendezvous::store {

using Sha256Digest = std::array<std::uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  Sha256Digest finish();

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> block_{};
  std::size_t block_used_ = 0;
  std::uint64_t total_bytes_ = 0;
};

Sha256Digest sha256(std::string_view bytes);
Sha256Digest hmac_sha256(std::string_view key, std::string_view message);

// Compares in time that depends only on the length, so a forged MAC learns nothing from how
// long the refusal took.
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace ddprun::rendezvous::store
