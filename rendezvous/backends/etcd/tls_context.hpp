#pragma once
// The TLS client context for https members (torchrun's --rdzv_conf protocol=https, cacert,
// cert, key): peer verification against cacert (or the system store), and a client
// certificate when the members require one.

#include <memory>

#include "rendezvous/backends/etcd/beast.hpp"
#include "rendezvous/backends/etcd/etcd_options.hpp"

namespace ddprun::rendezvous::backends::etcd {

// Throws std::invalid_argument naming the rdzv_conf option whose file cannot be used.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const EtcdTls& tls);

}  // namespace ddprun::rendezvous::backends::etcd
