#pragma once
// Which agent hosts the c10d store: torchrun's is_host heuristic (_matches_machine_hostname),
// with --local_addr taking precedence so several agents on one machine (127.0.0.2, .3) agree.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::rendezvous::backends {

// What this machine is called and where it listens; gathered by local_identity().
struct LocalIdentity {
  std::vector<std::string> names;      // gethostname, its canonical names
  std::vector<std::string> addresses;  // numeric addresses of every interface
};

struct HostQuestion {
  std::optional<bool> forced;             // --rdzv_conf is_host
  std::optional<std::string> local_addr;  // --local_addr
  std::string endpoint_host;
  std::vector<std::string> endpoint_addresses;    // endpoint_host resolved, numeric
  std::vector<std::string> local_addr_addresses;  // local_addr resolved, numeric
};

// Whether this agent hosts the store: never; if it wins the bind (an endpoint on this machine
// that any agent here may host: the others find the port taken and become clients, torchrun's
// rule); or it should (is_host=1, or --local_addr names the endpoint), when a failed bind may
// mean that another user's process holds the port (see taken_port_action), and joining it would
// hand the job to that process.
enum class StoreHosting : std::uint8_t { client, if_free, required };

// Who listens on a TCP port of this machine, from the kernel's socket tables (/proc/net/tcp and
// tcp6: one line per socket, the local address as HEXADDR:HEXPORT, state 0A for LISTEN, then the
// owner's uid). Pure: the tables' text comes in. The uids of the listeners on `port`, each once.
std::vector<unsigned> listening_uids(std::string_view socket_table, std::uint16_t port);

// What a should-host agent whose bind failed does: join the store there when every listener on
// the port is its own user's (another agent of this machine, torchrun's rule; the job secret
// then still checks it), else refuse. is_host=1 always refuses. No listener yet is not a refusal
// while time is left: another agent that won the bind is listed only once it listens, a moment
// later (look_again: try the bind, then the tables, once more).
enum class TakenPort : std::uint8_t { join, refuse, look_again };
TakenPort taken_port_action(bool forced, const std::vector<unsigned>& listener_uids,
                            unsigned own_uid, bool time_left);

// Pure.
StoreHosting store_hosting(const HostQuestion& question, const LocalIdentity& identity);

// Whether a numeric address is loopback (127.0.0.0/8 or ::1).
bool is_loopback_address(const std::string& numeric);

// I/O: the machine's names and interface addresses; resolving a host to numeric addresses
// (empty when it does not resolve).
LocalIdentity local_identity();
std::vector<std::string> resolve_numeric(const std::string& host);

// The node's address when --local_addr is not given: the FQDN (canonical name of gethostname).
std::string default_local_address();

// The address the in-process store binds: a numeric loopback endpoint binds exactly that
// address (so agents on 127.0.0.2 and 127.0.0.3 are distinct), anything else every interface.
std::string store_bind_address(const std::string& endpoint_host);

}  // namespace ddprun::rendezvous::backends
