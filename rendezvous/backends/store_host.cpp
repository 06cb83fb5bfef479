#include "rendezvous/backends/store_host.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>

#include "common/text.hpp"

namespace ddprun::rendezvous::backends {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool any_common(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& x) { return contains(b, x); });
}

std::string numeric_of(const sockaddr* address) {
  std::array<char, NI_MAXHOST> text{};
  const socklen_t length =
      address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (getnameinfo(address, length, text.data(), text.size(), nullptr, 0, NI_NUMERICHOST) != 0) {
    return {};
  }
  std::string numeric = text.data();
  // Link-local IPv6 carries a %scope suffix that never matches a resolved address.
  if (auto percent = numeric.find('%'); percent != std::string::npos) {
    numeric.resize(percent);
  }
  return numeric;
}

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

std::string hostname() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) {
    return {};
  }
  return name.data();
}

}  // namespace

bool is_loopback_address(const std::string& numeric) {
  in_addr v4{};
  if (inet_pton(AF_INET, numeric.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  return numeric == "::1";
}

StoreHosting store_hosting(const HostQuestion& q, const LocalIdentity& identity) {
  if (q.forced) {
    return *q.forced ? StoreHosting::required : StoreHosting::client;
  }
  if (q.local_addr && (q.endpoint_host == *q.local_addr ||
                       any_common(q.endpoint_addresses, q.local_addr_addresses))) {
    return StoreHosting::required;
  }
  // Otherwise an endpoint on this machine (loopback, or one of its names or addresses) may be
  // hosted by any agent here, --local_addr or not.
  const bool on_this_machine =
      q.endpoint_host == "localhost" || contains(identity.names, q.endpoint_host) ||
      std::any_of(q.endpoint_addresses.begin(), q.endpoint_addresses.end(), is_loopback_address) ||
      any_common(q.endpoint_addresses, identity.addresses);
  return on_this_machine ? StoreHosting::if_free : StoreHosting::client;
}

std::vector<unsigned> listening_uids(std::string_view socket_table, std::uint16_t port) {
  constexpr std::string_view kListen = "0A";
  std::vector<unsigned> uids;
  common::Lines lines(socket_table);
  while (const auto next_line = lines.next()) {
    const std::string_view line = *next_line;
    std::vector<std::string_view> fields;
    for (std::size_t at = 0; at < line.size();) {
      const auto begin = line.find_first_not_of(' ', at);
      if (begin == std::string_view::npos) {
        break;
      }
      const auto end = std::min(line.find(' ', begin), line.size());
      fields.push_back(line.substr(begin, end - begin));
      at = end;
    }
    // sl, local_address, rem_address, st, tx_queue:rx_queue, tr:tm->when, retrnsmt, uid, ...
    if (fields.size() < 8 || fields[3] != kListen) {
      continue;
    }
    const auto colon = fields[1].rfind(':');
    unsigned long listening_port = 0;
    unsigned long uid = 0;
    if (colon == std::string_view::npos ||
        std::from_chars(fields[1].data() + colon + 1, fields[1].data() + fields[1].size(),
                        listening_port, 16)
                .ec != std::errc() ||
        std::from_chars(fields[7].data(), fields[7].data() + fields[7].size(), uid).ec !=
            std::errc()) {
      continue;  // a line of another shape (the header)
    }
    if (listening_port == port &&
        std::find(uids.begin(), uids.end(), static_cast<unsigned>(uid)) == uids.end()) {
      uids.push_back(static_cast<unsigned>(uid));
    }
  }
  return uids;
}

TakenPort taken_port_action(bool forced, const std::vector<unsigned>& listener_uids,
                            unsigned own_uid, bool time_left) {
  if (forced) {
    return TakenPort::refuse;
  }
  if (listener_uids.empty()) {
    return time_left ? TakenPort::look_again : TakenPort::refuse;
  }
  const bool all_ours = std::all_of(listener_uids.begin(), listener_uids.end(),
                                    [own_uid](unsigned uid) { return uid == own_uid; });
  return all_ours ? TakenPort::join : TakenPort::refuse;
}

std::vector<std::string> resolve_numeric(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  if (host.empty() || getaddrinfo(host.c_str(), nullptr, &hints, &raw) != 0) {
    return {};
  }
  std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
  std::vector<std::string> out;
  for (const addrinfo* it = list.get(); it != nullptr; it = it->ai_next) {
    auto numeric = numeric_of(it->ai_addr);
    if (!numeric.empty() && !contains(out, numeric)) {
      out.push_back(std::move(numeric));
    }
  }
  return out;
}

LocalIdentity local_identity() {
  LocalIdentity identity;
  const std::string name = hostname();
  if (!name.empty()) {
    identity.names.push_back(name);
    const std::string canonical = default_local_address();
    if (!canonical.empty() && canonical != name) {
      identity.names.push_back(canonical);
    }
    identity.addresses = resolve_numeric(name);
  }
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) == 0) {
    std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, &freeifaddrs);
    for (const ifaddrs* it = list.get(); it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr ||
          (it->ifa_addr->sa_family != AF_INET && it->ifa_addr->sa_family != AF_INET6)) {
        continue;
      }
      auto numeric = numeric_of(it->ifa_addr);
      if (!numeric.empty() && !contains(identity.addresses, numeric)) {
        identity.addresses.push_back(std::move(numeric));
      }
    }
  }
  return identity;
}

std::string default_local_address() {
  const std::string name = hostname();
  if (name.empty()) {
    return "localhost";
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_CANONNAME;
  addrinfo* raw = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &raw) != 0) {
    return name;
  }
  std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
  if (list && list->ai_canonname != nullptr && list->ai_canonname[0] != '\0') {
    return list->ai_canonname;
  }
  return name;
}

std::string store_bind_address(const std::string& endpoint_host) {
  in_addr v4{};
  if (inet_pton(AF_INET, endpoint_host.c_str(), &v4) == 1 && is_loopback_address(endpoint_host)) {
    return endpoint_host;
  }
  return "0.0.0.0";
}

}  // namespace ddprun::rendezvous::backends
