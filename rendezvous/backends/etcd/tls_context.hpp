#pragma once
// TLS for https members (torchrun's --rdzv_conf protocol=https, cacert, cert, key): peer
// verification against cacert (or the system store), and a client certificate when the members
// require one. OpenSSL lives in the TLS module (tls_engine_abi.h), which the first TlsContext
// loads with dlopen: ddprun itself links no OpenSSL, so agents without https never map it.
//
// Lifetime: sessions keep their context, and contexts the module, alive (RAII); the module is
// loaded with RTLD_NODELETE, as OpenSSL must not be unmapped while the process runs.

#include <cstddef>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/backends/etcd/etcd_options.hpp"

struct ddprun_tls_api;
struct ddprun_tls_context;
struct ddprun_tls_session;

namespace ddprun::rendezvous::backends::etcd {

struct TlsModule;  // the loaded module (tls_context.cpp)

// One TLS client session (sans-I/O; TlsStream moves its bytes). One thread at a time.
class TlsSession {
 public:
  enum class Status { kDone, kWantInput, kWantOutput, kClosed, kFailed };
  struct Result {
    Status status = Status::kFailed;
    std::size_t bytes = 0;  // read or written, when kDone
  };

  TlsSession(std::shared_ptr<const void> owner, const ddprun_tls_api& api,
             ddprun_tls_session* session);
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  Result handshake();
  Result read(void* data, std::size_t size);
  Result write(const void* data, std::size_t size);
  // Ciphertext: returns the bytes taken (input) or given (output).
  std::size_t put_input(const void* data, std::size_t size);
  std::size_t take_output(void* data, std::size_t size);
  std::size_t pending_output() const;
  // Why the last call failed.
  std::string last_error() const;

 private:
  Result result(int status, std::size_t bytes) const;

  std::shared_ptr<const void> owner_;  // the context, hence the module
  const ddprun_tls_api& api_;
  ddprun_tls_session* session_;
};

class TlsContext : public std::enable_shared_from_this<TlsContext> {
 public:
  // Loads the module (once per context) and reads the certificate files. Throws
  // std::invalid_argument naming the rdzv_conf option whose file cannot be used, or saying
  // that the TLS module cannot be loaded.
  static std::shared_ptr<TlsContext> create(const EtcdTls& tls);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();

  // A session expecting a certificate for host; the text says why when none could be made.
  std::variant<std::unique_ptr<TlsSession>, std::string> session(const std::string& host) const;

 private:
  TlsContext(std::shared_ptr<const TlsModule> module, ddprun_tls_context* context);

  std::shared_ptr<const TlsModule> module_;
  ddprun_tls_context* context_;
};

// Where the module is looked for, first to last, for a program at exe_path: next to it in
// ../lib/ddprun/, then beside it.
std::vector<std::string> tls_module_candidates(const std::string& exe_path);

}  // namespace ddprun::rendezvous::backends::etcd
