// Parsing and validation of EtcdOptions: endpoints, durations and TLS files.

#include "rendezvous/backends/etcd/etcd_options.hpp"

#include <charconv>
#include <stdexcept>

#include "common/host_port.hpp"
#include "common/text.hpp"

namespace ddprun::rendezvous::backends::etcd {
namespace {

using common::trim;

EtcdEndpoint parse_one(std::string_view entry) {
  if (entry.find("://") != std::string_view::npos) {
    throw EtcdOptionError("rdzv_endpoint",
                          "'" + std::string(entry) +
                              "' has a scheme; give host:port and set protocol=https in "
                              "--rdzv_conf for TLS");
  }
  common::HostPort parsed;
  try {
    parsed = common::parse_host_port(entry);
  } catch (const std::invalid_argument& error) {
    throw EtcdOptionError("rdzv_endpoint", "'" + std::string(entry) + "' has " + error.what());
  }
  if (parsed.port == 0) {
    throw EtcdOptionError("rdzv_endpoint", "'" + std::string(entry) + "' has port 0");
  }
  return EtcdEndpoint{std::move(parsed.host), parsed.port.value_or(kEtcdDefaultPort)};
}

}  // namespace

std::vector<EtcdEndpoint> parse_etcd_endpoints(std::string_view text) {
  std::vector<EtcdEndpoint> endpoints;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    if (entry.empty()) {
      throw EtcdOptionError("rdzv_endpoint", "empty entry in the etcd endpoint list");
    }
    endpoints.push_back(parse_one(entry));
    if (endpoints.size() > kMaxEtcdEndpoints) {
      throw EtcdOptionError("rdzv_endpoint",
                            "more than " + std::to_string(kMaxEtcdEndpoints) + " etcd endpoints");
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return endpoints;
}

void validate(const EtcdOptions& options) {
  if (options.endpoints.empty()) {
    throw EtcdOptionError("rdzv_endpoint", "no etcd endpoint given");
  }
  if (options.endpoints.size() > kMaxEtcdEndpoints) {
    throw EtcdOptionError("rdzv_endpoint",
                          "more than " + std::to_string(kMaxEtcdEndpoints) + " etcd endpoints");
  }
  for (const auto& endpoint : options.endpoints) {
    if (endpoint.host.empty() || endpoint.port == 0) {
      throw EtcdOptionError("rdzv_endpoint",
                            "incomplete etcd endpoint '" + format_endpoint(endpoint) + "'");
    }
  }
  if (options.lease_ttl.count() < 1) {
    throw std::invalid_argument("etcd lease TTL must be at least 1 s");
  }
  if (options.keepalive_interval.count() < 1 || options.keepalive_interval >= options.lease_ttl) {
    throw std::invalid_argument(
        "etcd keep-alive interval must be positive and shorter than the lease TTL");
  }
  if (options.op_timeout.count() < 1) {
    throw std::invalid_argument("etcd operation timeout must be positive");
  }
  if (options.failover_budget < options.op_timeout) {
    throw std::invalid_argument("etcd failover budget must be at least the operation timeout");
  }
  const auto& tls = options.tls;
  if (!tls.enabled && (!tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty())) {
    throw EtcdOptionError("rdzv_conf", "cacert, cert and key need protocol=https");
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    throw EtcdOptionError("rdzv_conf",
                          "cert and key go together (client certificate and its private key)");
  }
  const auto& auth = options.auth;
  if (!auth.enabled() && !auth.password_file.empty()) {
    throw EtcdOptionError("rdzv_conf password_file", "needs user (the etcd user it is for)");
  }
  for (const char c : auth.user) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\'' || c == '"') {
      throw EtcdOptionError("rdzv_conf user", "has a control character or a quote");
    }
  }
  if (auth.enabled() && !tls.enabled && !auth.insecure_transport_allowed) {
    throw EtcdOptionError(
        "rdzv_conf user",
        "the etcd password, and the token etcd trades for it, would cross the "
        "network in clear over http; give protocol=https (and cacert), or insecure_auth=1 "
        "where the network is trusted (etcd on loopback, a private network)");
  }
}

namespace {

// An etcd key folder: absolute, printable, no empty or dot segments (etcdctl users read these).
std::string checked_prefix(const std::string& prefix) {
  const auto bad = [&](const std::string& why) {
    return EtcdOptionError(
        "rdzv_conf etcd_prefix",
        "'" + prefix + "' " + why + "; expected an absolute key folder such as /jobs/team-a");
  };
  if (prefix.empty() || prefix.front() != '/') {
    throw bad("does not start with /");
  }
  if (prefix.size() > kMaxEtcdPrefixBytes) {
    throw bad("is longer than " + std::to_string(kMaxEtcdPrefixBytes) + " bytes");
  }
  for (const char c : prefix) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '/' || c == '.' || c == '-' || c == '_';
    if (!allowed) {
      throw bad("has a character other than letters, digits, / . - _");
    }
  }
  std::string trimmed = prefix;
  while (trimmed.size() > 1 && trimmed.back() == '/') {
    trimmed.pop_back();
  }
  for (std::size_t at = 0; at < trimmed.size();) {
    const auto next = trimmed.find('/', at + 1);
    const std::string segment =
        trimmed.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    if ((segment.empty() && trimmed.size() > 1) || segment == "." || segment == "..") {
      throw bad("has an empty, . or .. segment");
    }
    at = next == std::string::npos ? trimmed.size() : next;
  }
  return trimmed == "/" ? std::string() : trimmed;
}

std::string conf_value(const std::map<std::string, std::string>& conf, const std::string& key) {
  const auto it = conf.find(key);
  return it == conf.end() ? std::string() : it->second;
}

// insecure_auth: an explicit 1 or 0, nothing that might be a typo of either.
bool insecure_auth(const std::map<std::string, std::string>& conf) {
  const auto it = conf.find("insecure_auth");
  if (it == conf.end() || it->second == "0") {
    return false;
  }
  if (it->second == "1") {
    return true;
  }
  throw EtcdOptionError("rdzv_conf insecure_auth",
                        "'" + it->second +
                            "' is not a valid choice; expected 1 (send etcd's password over "
                            "plain http) or 0");
}

}  // namespace

EtcdOptions etcd_options_from_command_line(std::string_view endpoints,
                                           const std::map<std::string, std::string>& rdzv_conf) {
  EtcdOptions options;
  options.endpoints = parse_etcd_endpoints(endpoints);
  const std::string protocol = conf_value(rdzv_conf, "protocol");
  if (!protocol.empty() && protocol != "http" && protocol != "https") {
    throw EtcdOptionError("rdzv_conf protocol",
                          "'" + protocol + "' is not a valid choice; expected http|https");
  }
  options.tls.enabled = protocol == "https";
  options.tls.ca_file = conf_value(rdzv_conf, "cacert");
  options.tls.cert_file = conf_value(rdzv_conf, "cert");
  options.tls.key_file = conf_value(rdzv_conf, "key");
  options.auth.user = conf_value(rdzv_conf, "user");
  options.auth.password_file = conf_value(rdzv_conf, "password_file");
  options.auth.insecure_transport_allowed = insecure_auth(rdzv_conf);
  if (rdzv_conf.contains("user") && options.auth.user.empty()) {
    throw EtcdOptionError("rdzv_conf user", "empty; give the etcd user's name");
  }
  if (rdzv_conf.contains("password")) {
    throw EtcdOptionError("rdzv_conf password",
                          "a password on the command line is visible to every user of the machine; "
                          "give password_file=PATH (mode 0600) or the environment variable " +
                              std::string(kEtcdPasswordEnv));
  }
  const auto prefix = rdzv_conf.find("etcd_prefix");
  const std::string folder =
      checked_prefix(prefix == rdzv_conf.end() ? std::string(kDefaultEtcdPrefix) : prefix->second);
  // The round's keys start with ddprun/rdzv/<run_id>/.
  options.key_prefix = folder + "/";
  validate(options);
  return options;
}

std::string format_endpoint(const EtcdEndpoint& endpoint) {
  const bool ipv6 = endpoint.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

std::string format_endpoints(const std::vector<EtcdEndpoint>& endpoints) {
  std::string text;
  for (const auto& endpoint : endpoints) {
    if (!text.empty()) {
      text += ',';
    }
    text += format_endpoint(endpoint);
  }
  return text;
}

}  // namespace ddprun::rendezvous::backends::etcd
