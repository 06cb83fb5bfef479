#pragma once
// What an EtcdKv needs to know: where the members are, which part of the keyspace is this
// run's, how long a lease lives, how long an operation may take, and how to speak TLS.
// parse_etcd_endpoints() and validate() check every field once, where the options enter, and
// name the offending option in their message (std::invalid_argument).

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/backends/etcd/http_limits.hpp"

namespace ddprun::rendezvous::backends::etcd {

// An etcd option that cannot be used, with which option it is ("rdzv_endpoint", "rdzv_conf
// user", ...) as data: the launcher names it without reading the message. what() is
// "<option>: <problem>".
class EtcdOptionError : public std::invalid_argument {
 public:
  EtcdOptionError(std::string option, std::string problem)
      : std::invalid_argument(option + ": " + problem),
        option_(std::move(option)),
        problem_(std::move(problem)) {}
  const std::string& option() const { return option_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string option_;
  std::string problem_;
};

struct EtcdEndpoint {
  std::string host;  // name or IP address (IPv6 without brackets)
  std::uint16_t port = 0;
};

// torchrun's --rdzv_conf keys protocol, cacert, cert, key.
struct EtcdTls {
  bool enabled = false;   // protocol=https
  std::string ca_file;    // cacert: PEM bundle that signs the members' certificates; empty: the
                          // system's trust store
  std::string cert_file;  // cert: this client's certificate chain (PEM), for client-cert auth
  std::string key_file;   // key: its private key (PEM)
};

// etcd's own user/password authentication (rdzv_conf user, password_file; or the environment
// variable DDPRUN_ETCD_PASSWORD): the client trades them for a token (/v3/auth/authenticate)
// and sends it with every request. The launcher reads the password; it is never printed.
struct EtcdAuth {
  std::string user;           // empty: no authentication by user
  std::string password_file;  // where the launcher read the password from; empty: environment
  std::string password;
  // rdzv_conf insecure_auth=1: the user may send the password, and then its token, over plain
  // http. Without it, a user needs protocol=https (validate() refuses the rest).
  bool insecure_transport_allowed = false;
  bool enabled() const { return !user.empty(); }
};

inline constexpr std::string_view kEtcdPasswordEnv = "DDPRUN_ETCD_PASSWORD";

struct EtcdOptions {
  std::vector<EtcdEndpoint> endpoints;
  // Every key of this run lives under it, e.g. "/ddprun/<run_id>/".
  std::string key_prefix;
  // Lease of this agent's beat keys: they vanish this long after the agent stops renewing.
  // etcd raises a TTL below 1.5 election timeouts (2 s by default) to that minimum.
  std::chrono::seconds lease_ttl{10};
  // How often the lease is renewed; a third of the TTL, as etcd's own client does.
  std::chrono::milliseconds keepalive_interval{3333};
  // Deadline of one HTTP exchange with one member.
  std::chrono::milliseconds op_timeout{5000};
  // How long one operation may keep trying (other members, reconnecting) before it fails.
  std::chrono::milliseconds failover_budget{15000};
  EtcdTls tls;
  EtcdAuth auth;
  HttpLimits limits;
};

inline constexpr std::uint16_t kEtcdDefaultPort = 2379;
inline constexpr std::size_t kMaxEtcdEndpoints = 64;

inline constexpr std::string_view kDefaultEtcdPrefix = "/";
inline constexpr std::size_t kMaxEtcdPrefixBytes = 256;

// What the command line says about an etcd rendezvous: the members (--rdzv_endpoint) and
// --rdzv_conf's etcd keys, torchrun's names: protocol (http|https), cacert, cert, key, and
// etcd_prefix (a key folder every run's keys go under; default /, so a run's keys are
// /ddprun/rdzv/<run_id>/...), and ddprun's user and password_file (auth.password stays empty:
// the launcher reads it), and insecure_auth (1|0). Durations keep their defaults (the agent derives
// them from the round's settings). Throws EtcdOptionError naming the option at fault.
EtcdOptions etcd_options_from_command_line(std::string_view endpoints,
                                           const std::map<std::string, std::string>& rdzv_conf);

// "host1:2379,host2,[::1]:2379" (as --rdzv_endpoint); a missing port means 2379.
std::vector<EtcdEndpoint> parse_etcd_endpoints(std::string_view text);

// Throws std::invalid_argument naming the first bad option; among them a user over plain http
// without insecure_transport_allowed.
void validate(const EtcdOptions& options);

// "127.0.0.1:2379,[::1]:2379", for messages.
std::string format_endpoints(const std::vector<EtcdEndpoint>& endpoints);
std::string format_endpoint(const EtcdEndpoint& endpoint);

}  // namespace ddprun::rendezvous::backends::etcd
