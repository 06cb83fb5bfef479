#pragma once
// Standard base64 with padding (RFC 4648 §4), the encoding of etcd's bytes fields in JSON.

#include <optional>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::backends::etcd {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not canonical padded base64 (wrong length, foreign characters).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace ddprun::rendezvous::backends::etcd
