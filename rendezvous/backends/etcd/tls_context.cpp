// Loads the TLS module on first use and wraps its C handles.

#include "rendezvous/backends/etcd/tls_context.hpp"

#include <dlfcn.h>

#include <array>
#include <filesystem>
#include <stdexcept>

#include "rendezvous/backends/etcd/tls_engine_abi.h"

namespace ddprun::rendezvous::backends::etcd {

constexpr std::string_view kModuleFile = "libddprun_etcd_tls.so";

struct TlsModule {
  void* handle = nullptr;
  const ddprun_tls_api* api = nullptr;

  TlsModule() = default;
  TlsModule(const TlsModule&) = delete;
  TlsModule& operator=(const TlsModule&) = delete;
  ~TlsModule() {
    if (handle != nullptr) {
      dlclose(handle);
    }
  }
};

namespace {

std::string program_path() {
  std::error_code ignored;
  return std::filesystem::read_symlink("/proc/self/exe", ignored).string();
}

// Throws std::invalid_argument when no candidate loads.
std::shared_ptr<const TlsModule> load_module() {
  std::string why;
  bool any_found = false;
  for (const auto& path : tls_module_candidates(program_path())) {
    if (!std::filesystem::exists(path)) {
      continue;
    }
    any_found = true;
    // RTLD_NODELETE: OpenSSL registers exit handlers and must stay mapped.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      why += std::string("; ") + dlerror();
      continue;
    }
    auto module = std::make_shared<TlsModule>();
    module->handle = handle;
    const auto entry =
        reinterpret_cast<ddprun_tls_entry_point>(dlsym(handle, DDPRUN_TLS_ENTRY_POINT));
    module->api = entry != nullptr ? entry() : nullptr;
    if (module->api == nullptr || module->api->abi_version != DDPRUN_TLS_ABI_VERSION) {
      why += "; " + path + " is not a TLS module of this ddprun";
      continue;
    }
    return module;
  }
  if (!any_found) {
    // Not a broken install: a build without the module (the pip package, DDPRUN_ETCD_TLS=OFF).
    throw std::invalid_argument(
        "rdzv_conf protocol=https: this ddprun was built without TLS support (no " +
        std::string(kModuleFile) + " in ../lib/ddprun/ or beside " + program_path() +
        "; the pip package leaves it out, as it would need OpenSSL); use http:// etcd members, "
        "or a ddprun built from source with OpenSSL (scripts/build.sh)");
  }
  throw std::invalid_argument("rdzv_conf protocol=https: cannot load the TLS module " +
                              std::string(kModuleFile) + " (looked in ../lib/ddprun/ and beside " +
                              program_path() + ")" + why);
}

const char* or_null(const std::string& text) {
  return text.empty() ? nullptr : text.c_str();
}

}  // namespace

std::vector<std::string> tls_module_candidates(const std::string& exe_path) {
  const auto dir = std::filesystem::path(exe_path).parent_path();
  return {(dir / ".." / "lib" / "ddprun" / kModuleFile).lexically_normal().string(),
          (dir / kModuleFile).string()};
}

// --- TlsContext -------------------------------------------------------------------------------

TlsContext::TlsContext(std::shared_ptr<const TlsModule> module, ddprun_tls_context* context)
    : module_(std::move(module)), context_(context) {}

TlsContext::~TlsContext() {
  module_->api->context_free(context_);
}

std::shared_ptr<TlsContext> TlsContext::create(const EtcdTls& tls) {
  auto module = load_module();
  char error[256] = "";
  int option = DDPRUN_TLS_OPTION_NONE;
  ddprun_tls_context* context =
      module->api->context_new(or_null(tls.ca_file), or_null(tls.cert_file), or_null(tls.key_file),
                               &option, error, sizeof error);
  if (context == nullptr) {
    // By ddprun_tls_option: the rdzv_conf key and the file it named.
    constexpr std::array<std::string_view, 4> kNames{"protocol", "cacert", "cert", "key"};
    const std::array<std::string, 4> paths{"https",
                                           tls.ca_file.empty() ? "(system default)" : tls.ca_file,
                                           tls.cert_file, tls.key_file};
    const auto which = static_cast<std::size_t>(
        option >= DDPRUN_TLS_OPTION_CA && option <= DDPRUN_TLS_OPTION_KEY ? option : 0);
    throw std::invalid_argument("rdzv_conf " + std::string(kNames[which]) + "=" + paths[which] +
                                ": cannot use it: " + error);
  }
  return std::shared_ptr<TlsContext>(new TlsContext(std::move(module), context));
}

std::variant<std::unique_ptr<TlsSession>, std::string> TlsContext::session(
    const std::string& host) const {
  char error[256] = "";
  ddprun_tls_session* session =
      module_->api->session_new(context_, host.c_str(), error, sizeof error);
  if (session == nullptr) {
    return std::string(error);
  }
  return std::make_unique<TlsSession>(shared_from_this(), *module_->api, session);
}

// --- TlsSession -------------------------------------------------------------------------------

TlsSession::TlsSession(std::shared_ptr<const void> owner, const ddprun_tls_api& api,
                       ddprun_tls_session* session)
    : owner_(std::move(owner)), api_(api), session_(session) {}

TlsSession::~TlsSession() {
  api_.session_free(session_);
}

TlsSession::Result TlsSession::result(int status, std::size_t bytes) const {
  switch (status) {
    case DDPRUN_TLS_DONE:
      return {Status::kDone, bytes};
    case DDPRUN_TLS_WANT_INPUT:
      return {Status::kWantInput, 0};
    case DDPRUN_TLS_WANT_OUTPUT:
      return {Status::kWantOutput, 0};
    case DDPRUN_TLS_CLOSED:
      return {Status::kClosed, 0};
    default:
      return {Status::kFailed, 0};
  }
}

TlsSession::Result TlsSession::handshake() {
  return result(api_.handshake(session_), 0);
}

TlsSession::Result TlsSession::read(void* data, std::size_t size) {
  std::size_t done = 0;
  const int status = api_.read(session_, data, size, &done);
  return result(status, done);
}

TlsSession::Result TlsSession::write(const void* data, std::size_t size) {
  std::size_t done = 0;
  const int status = api_.write(session_, data, size, &done);
  return result(status, done);
}

std::size_t TlsSession::put_input(const void* data, std::size_t size) {
  return api_.put_input(session_, data, size);
}

std::size_t TlsSession::take_output(void* data, std::size_t size) {
  return api_.take_output(session_, data, size);
}

std::size_t TlsSession::pending_output() const {
  return api_.pending_output(session_);
}

std::string TlsSession::last_error() const {
  return api_.last_error(session_);
}

}  // namespace ddprun::rendezvous::backends::etcd
