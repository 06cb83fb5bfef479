// The TLS module: OpenSSL behind the C interface of tls_engine_abi.h, with a BIO pair between
// the session and the caller's buffers. Built as libddprun_etcd_tls.so and loaded by
// tls_context.cpp only for https members. It uses no C++ runtime (no new, no exceptions, no
// standard library beyond C's), so the module needs only libc, libssl and libcrypto.

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rendezvous/backends/etcd/tls_engine_abi.h"

struct ddprun_tls_context {
  SSL_CTX* ctx;
};

struct ddprun_tls_session {
  SSL* ssl;
  BIO* network;  // the caller's end of the pair; the session holds the other
  char error[256];
};

namespace {

// Ciphertext buffered each way between the session and the caller: a few TLS records.
constexpr size_t kPairBufferBytes = 64 * 1024;

// OpenSSL's reason for the last failure (and clears its queue), or fallback.
void describe_failure(char* error, size_t error_size, const char* fallback) {
  if (error == nullptr || error_size == 0) {
    ERR_clear_error();
    return;
  }
  const unsigned long code = ERR_peek_last_error();
  if (code != 0) {
    char reason[200];
    ERR_error_string_n(code, reason, sizeof reason);
    std::snprintf(error, error_size, "%s", reason);
  } else {
    std::snprintf(error, error_size, "%s", fallback);
  }
  ERR_clear_error();
}

ddprun_tls_context* refuse(SSL_CTX* ctx, int* option, int which, char* error, size_t error_size) {
  describe_failure(error, error_size, "cannot be used");
  if (option != nullptr) {
    *option = which;
  }
  SSL_CTX_free(ctx);
  return nullptr;
}

ddprun_tls_context* context_new(const char* ca_file, const char* cert_file, const char* key_file,
                                int* option, char* error, size_t error_size) {
  if (option != nullptr) {
    *option = DDPRUN_TLS_OPTION_NONE;
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return refuse(ctx, option, DDPRUN_TLS_OPTION_NONE, error, error_size);
  }
  SSL_CTX_set_options(ctx, SSL_OP_ALL);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const int ca_loaded = ca_file != nullptr ? SSL_CTX_load_verify_locations(ctx, ca_file, nullptr)
                                           : SSL_CTX_set_default_verify_paths(ctx);
  if (ca_loaded != 1) {
    return refuse(ctx, option, DDPRUN_TLS_OPTION_CA, error, error_size);
  }
  if (cert_file != nullptr) {
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
      return refuse(ctx, option, DDPRUN_TLS_OPTION_CERT, error, error_size);
    }
    // Also checks that the key belongs to the certificate.
    if (key_file == nullptr || SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
      return refuse(ctx, option, DDPRUN_TLS_OPTION_KEY, error, error_size);
    }
  }
  auto* context = static_cast<ddprun_tls_context*>(std::calloc(1, sizeof(ddprun_tls_context)));
  if (context == nullptr) {
    return refuse(ctx, option, DDPRUN_TLS_OPTION_NONE, error, error_size);
  }
  context->ctx = ctx;
  return context;
}

void context_free(ddprun_tls_context* context) {
  if (context != nullptr) {
    SSL_CTX_free(context->ctx);
    std::free(context);
  }
}

void session_free(ddprun_tls_session* session) {
  if (session != nullptr) {
    SSL_free(session->ssl);  // frees the session's end of the pair
    BIO_free(session->network);
    std::free(session);
  }
}

bool is_ip_address(const char* host) {
  unsigned char address[16];
  return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

// The peer must present a certificate for host; a DNS name also goes out as SNI.
bool expect_peer(SSL* ssl, const char* host) {
  if (is_ip_address(host)) {
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1;
  }
  // SSL_set_tlsext_host_name, without the macro's C cast.
  return SSL_set1_host(ssl, host) == 1 &&
         SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                  static_cast<void*>(const_cast<char*>(host))) == 1;
}

ddprun_tls_session* session_new(ddprun_tls_context* context, const char* host, char* error,
                                size_t error_size) {
  auto* session = static_cast<ddprun_tls_session*>(std::calloc(1, sizeof(ddprun_tls_session)));
  if (session == nullptr) {
    std::snprintf(error, error_size, "out of memory");
    return nullptr;
  }
  BIO* inner = nullptr;
  session->ssl = SSL_new(context->ctx);
  if (session->ssl == nullptr ||
      BIO_new_bio_pair(&inner, kPairBufferBytes, &session->network, kPairBufferBytes) != 1) {
    describe_failure(error, error_size, "cannot create a TLS session");
    session_free(session);
    return nullptr;
  }
  SSL_set_bio(session->ssl, inner, inner);
  SSL_set_mode(session->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_connect_state(session->ssl);
  if (!expect_peer(session->ssl, host)) {
    describe_failure(error, error_size, "cannot set the expected peer name");
    session_free(session);
    return nullptr;
  }
  return session;
}

// Maps the outcome of an SSL_* call; result > 0 is success.
int status_of(ddprun_tls_session* session, int result) {
  if (result > 0) {
    return DDPRUN_TLS_DONE;
  }
  switch (SSL_get_error(session->ssl, result)) {
    case SSL_ERROR_WANT_READ:
      return DDPRUN_TLS_WANT_INPUT;
    case SSL_ERROR_WANT_WRITE:
      return DDPRUN_TLS_WANT_OUTPUT;
    case SSL_ERROR_ZERO_RETURN:
      return DDPRUN_TLS_CLOSED;
    default:
      break;
  }
  const long verified = SSL_get_verify_result(session->ssl);
  if (verified != X509_V_OK) {
    std::snprintf(session->error, sizeof session->error, "certificate verify failed (%s)",
                  X509_verify_cert_error_string(verified));
    ERR_clear_error();
  } else {
    describe_failure(session->error, sizeof session->error, "TLS failure");
  }
  return DDPRUN_TLS_FAILED;
}

int handshake(ddprun_tls_session* session) {
  return status_of(session, SSL_do_handshake(session->ssl));
}

int read(ddprun_tls_session* session, void* data, size_t size, size_t* done) {
  *done = 0;
  return status_of(session, SSL_read_ex(session->ssl, data, size, done));
}

int write(ddprun_tls_session* session, const void* data, size_t size, size_t* done) {
  *done = 0;
  return status_of(session, SSL_write_ex(session->ssl, data, size, done));
}

// At most limit of size bytes, as the int that BIO_read and BIO_write take.
int bounded(size_t size, size_t limit) {
  return static_cast<int>(size < limit ? size : limit);
}

size_t transferred(int result) {
  return result > 0 ? static_cast<size_t>(result) : 0;
}

size_t put_input(ddprun_tls_session* session, const void* data, size_t size) {
  const size_t room = BIO_ctrl_get_write_guarantee(session->network);
  return transferred(BIO_write(session->network, data, bounded(size, room)));
}

size_t take_output(ddprun_tls_session* session, void* data, size_t size) {
  return transferred(
      BIO_read(session->network, data, bounded(size, BIO_ctrl_pending(session->network))));
}

size_t pending_output(const ddprun_tls_session* session) {
  return BIO_ctrl_pending(session->network);
}

const char* last_error(const ddprun_tls_session* session) {
  return session->error;
}

constexpr ddprun_tls_api kApi = {
    DDPRUN_TLS_ABI_VERSION,
    context_new,
    context_free,
    session_new,
    session_free,
    handshake,
    read,
    write,
    put_input,
    take_output,
    pending_output,
    last_error,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ddprun_tls_api* ddprun_etcd_tls_api() {
  return &kApi;
}
