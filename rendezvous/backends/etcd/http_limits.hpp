#pragma once
// Bounds on what an etcd member may send us: every reply is untrusted network input, so each
// length has a named ceiling and a reply over it is a protocol error (the connection is dropped
// before anything that large is allocated).

#include <cstddef>
#include <cstdint>

namespace ddprun::rendezvous::backends::etcd {

struct HttpLimits {
  // Status line plus header fields of one reply (etcd sends about 400 bytes).
  std::uint32_t max_header_bytes = 16 * 1024;
  // Body of one unary reply. etcd caps a request at 1.5 MiB, so a reply larger than this is
  // either a huge multi-key read or a broken server.
  std::uint64_t max_body_bytes = 32 * 1024 * 1024;
  // One JSON message of a watch stream (one line of the chunked reply).
  std::size_t max_stream_line_bytes = 16 * 1024 * 1024;
  // Nesting of a JSON reply (etcd's replies nest 6 deep); deeper means a hostile server.
  std::size_t max_json_depth = 32;
};

}  // namespace ddprun::rendezvous::backends::etcd
