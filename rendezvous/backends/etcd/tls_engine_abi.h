/* The C interface of the TLS module (libddprun_etcd_tls.so, tls_engine_module.cpp), which alone
 * links OpenSSL: ddprun loads it with dlopen on the first https etcd member, so an agent that
 * never speaks https never maps libssl or libcrypto. C, not C++, across the boundary: ddprun
 * carries its own static C++ runtime, and the module uses none.
 *
 * The engine is sans-I/O: a session never touches a socket. Ciphertext from the peer goes in
 * with put_input, ciphertext for the peer comes out with take_output, and the caller (TlsStream)
 * moves it over TCP. After every handshake, read or write call the caller sends whatever
 * pending_output reports, then acts on the status.
 *
 * Threading: a context may be shared by sessions on one thread; a session is used by one
 * thread at a time. */
#ifndef DDPRUN_RENDEZVOUS_BACKENDS_ETCD_TLS_ENGINE_ABI_H
#define DDPRUN_RENDEZVOUS_BACKENDS_ETCD_TLS_ENGINE_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPRUN_TLS_ABI_VERSION 1
/* The one symbol the module exports: returns its table of functions. */
#define DDPRUN_TLS_ENTRY_POINT "ddprun_etcd_tls_api"

enum ddprun_tls_status {
  DDPRUN_TLS_DONE = 0,        /* finished (read, write: *done bytes) */
  DDPRUN_TLS_WANT_INPUT = 1,  /* send pending output, then put more input and call again */
  DDPRUN_TLS_WANT_OUTPUT = 2, /* send pending output, then call again */
  DDPRUN_TLS_CLOSED = 3,      /* the peer closed the TLS session (close_notify) */
  DDPRUN_TLS_FAILED = 4       /* last_error says why; the session is unusable */
};

/* Which context_new argument could not be used. */
enum ddprun_tls_option {
  DDPRUN_TLS_OPTION_NONE = 0,
  DDPRUN_TLS_OPTION_CA = 1,
  DDPRUN_TLS_OPTION_CERT = 2,
  DDPRUN_TLS_OPTION_KEY = 3
};

struct ddprun_tls_context;
struct ddprun_tls_session;

struct ddprun_tls_api {
  int abi_version; /* DDPRUN_TLS_ABI_VERSION */
  /* A TLS 1.2+ client context verifying peers against ca_file (NULL: the system store), with
   * a client certificate chain and key when cert_file is not NULL. NULL on failure: *option
   * names the argument, error (NUL-terminated, at most error_size bytes) says why. */
  struct ddprun_tls_context* (*context_new)(const char* ca_file, const char* cert_file,
                                            const char* key_file, int* option, char* error,
                                            size_t error_size);
  void (*context_free)(struct ddprun_tls_context* context);
  /* A client session whose peer certificate must name host (a DNS name, sent as SNI, or an
   * IP address). NULL on failure, with error filled as above. */
  struct ddprun_tls_session* (*session_new)(struct ddprun_tls_context* context, const char* host,
                                            char* error, size_t error_size);
  void (*session_free)(struct ddprun_tls_session* session);
  int (*handshake)(struct ddprun_tls_session* session);
  /* Plaintext in and out; *done: bytes read or written when DONE, else 0. */
  int (*read)(struct ddprun_tls_session* session, void* data, size_t size, size_t* done);
  int (*write)(struct ddprun_tls_session* session, const void* data, size_t size, size_t* done);
  /* Ciphertext: returns how many bytes were taken or given (input may take fewer than size). */
  size_t (*put_input)(struct ddprun_tls_session* session, const void* data, size_t size);
  size_t (*take_output)(struct ddprun_tls_session* session, void* data, size_t size);
  size_t (*pending_output)(const struct ddprun_tls_session* session);
  /* Why the last call FAILED; never NULL. Valid until the next call on the session. */
  const char* (*last_error)(const struct ddprun_tls_session* session);
};

typedef const struct ddprun_tls_api* (*ddprun_tls_entry_point)(void);

#ifdef __cplusplus
}
#endif

#endif /* DDPRUN_RENDEZVOUS_BACKENDS_ETCD_TLS_ENGINE_ABI_H */
