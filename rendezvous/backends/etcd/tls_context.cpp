// Builds the shared TLS client context from the rdzv_conf TLS options, once, at start-up.

#include "rendezvous/backends/etcd/tls_context.hpp"

#include <stdexcept>
#include <string>

namespace ddprun::rendezvous::backends::etcd {
namespace {

namespace ssl = boost::asio::ssl;

void load(const std::string& option, const std::string& path, auto&& loader) {
  boost::system::error_code ec;
  loader(ec);
  if (ec) {
    throw std::invalid_argument("rdzv_conf " + option + "=" + path +
                                ": cannot use it: " + ec.message());
  }
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const EtcdTls& tls) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  context->set_verify_mode(ssl::verify_peer);
  if (tls.ca_file.empty()) {
    load("cacert", "(system default)",
         [&](boost::system::error_code& ec) { context->set_default_verify_paths(ec); });
  } else {
    load("cacert", tls.ca_file,
         [&](boost::system::error_code& ec) { context->load_verify_file(tls.ca_file, ec); });
  }
  if (!tls.cert_file.empty()) {
    load("cert", tls.cert_file, [&](boost::system::error_code& ec) {
      context->use_certificate_chain_file(tls.cert_file, ec);
    });
    load("key", tls.key_file, [&](boost::system::error_code& ec) {
      context->use_private_key_file(tls.key_file, ssl::context::pem, ec);
    });
  }
  return context;
}

}  // namespace ddprun::rendezvous::backends::etcd
