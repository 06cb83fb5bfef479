#include "agent/node/rendezvous_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "agent/base/round_types.hpp"
#include "common/random.hpp"
#include "rendezvous/backends/etcd/etcd_kv.hpp"
#include "rendezvous/backends/store_host.hpp"
#include "rendezvous/backends/store_kv/store_kv.hpp"
#include "rendezvous/round/records.hpp"
#include "rendezvous/round/round_settings.hpp"

namespace ddprun::agent {
namespace {

namespace backends = rendezvous::backends;
namespace round = rendezvous::round;
namespace store = rendezvous::store;

// How long ops wait for a new connection after an established one to the store broke: short,
// since a store that went away with its host's agent is not coming back.
constexpr std::chrono::seconds kReconnectBudget{5};

// etcd: a lease below 2 s would expire during an ordinary leader election.
constexpr std::chrono::seconds kEtcdMinLeaseTtl{2};
constexpr std::chrono::milliseconds kEtcdOpTimeout{5000};
constexpr std::chrono::milliseconds kEtcdFailoverLimit{15000};

std::chrono::milliseconds millis(common::Seconds seconds) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(seconds);
}

std::unique_ptr<store::StoreServer> start_store(const std::string& bind_host, uint16_t port,
                                                const std::string& secret) {
  store::StoreServerOptions options;
  options.host = bind_host;
  options.port = port;
  options.secret = secret;
  return store::StoreServer::start(options);
}

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::unique_ptr<store::StoreServer> hosted;
};

// The kernel's TCP socket tables, IPv4 and IPv6, as one text.
std::string socket_tables() {
  std::string text;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream table(path);
    text.append(std::istreambuf_iterator<char>(table), std::istreambuf_iterator<char>());
  }
  return text;
}

// How long a should-host agent whose bind failed looks for the port's listener: the agent that
// won the bind lists it only once it listens, microseconds later on an idle machine, longer on
// a loaded one. The kernel announces no such event, so the tables are read again on a short
// period; the bind is retried too, in case the holder went away.
constexpr std::chrono::seconds kTakenPortLookFor{2};
constexpr std::chrono::milliseconds kTakenPortLookEvery{10};

std::string holder_description(const std::vector<unsigned>& holders, unsigned own_uid) {
  for (const unsigned uid : holders) {
    if (uid != own_uid) {
      return "another user's process (uid " + std::to_string(uid) + ") holds the port";
    }
  }
  return holders.empty() ? "no process listens there, yet the port is bound"
                         : "another process holds the port";
}

// An agent that should host the store found its port taken. Another agent of this machine, of
// this user, may have been first (torchrun's rule: join it; a job secret then still checks
// it). Anyone else's process is refused: joining it would hand it the job.
void host_or_join(Endpoint& endpoint, bool forced, const std::string& secret,
                  const std::string& first_bind_error) {
  const auto own_uid = static_cast<unsigned>(::getuid());
  const auto give_up_at = std::chrono::steady_clock::now() + kTakenPortLookFor;
  std::string bind_error = first_bind_error;
  while (true) {
    const auto holders = backends::listening_uids(socket_tables(), endpoint.port);
    const bool time_left = std::chrono::steady_clock::now() < give_up_at;
    switch (backends::taken_port_action(forced, holders, own_uid, time_left)) {
      case backends::TakenPort::join:
        return;
      case backends::TakenPort::look_again:
        std::this_thread::sleep_for(kTakenPortLookEvery);
        try {
          endpoint.hosted =
              start_store(backends::store_bind_address(endpoint.host), endpoint.port, secret);
          return;
        } catch (const std::exception& error) {
          bind_error = error.what();
        }
        continue;
      case backends::TakenPort::refuse:
        throw RendezvousError(
            "cannot host the rendezvous store at " + endpoint.host + ":" +
            std::to_string(endpoint.port) + " (" +
            (forced ? std::string("is_host=1") : "--local_addr names the endpoint") +
            "): " + bind_error + "; " + holder_description(holders, own_uid) +
            ", and this agent does not join whatever listens there");
    }
  }
}

// c10d: host when is_host says so, or when the endpoint names this agent (--local_addr) or this
// machine (a loopback address, one of its names or addresses). Any agent on the machine may
// win the bind of a machine's endpoint; the others become clients, as torchrun does. An agent
// that should host (is_host=1, or --local_addr is the endpoint) and cannot bind fails unless
// the port is held by its own user (host_or_join).
Endpoint c10d_endpoint(const RendezvousConfig& config, const round::RdzvSettings& settings) {
  Endpoint endpoint;
  endpoint.host = config.host;
  endpoint.port = config.port;
  if (config.standalone) {
    // A private store on a free port; only this agent uses it.
    endpoint.hosted = start_store("127.0.0.1", 0, config.secret);
    endpoint.host = "127.0.0.1";
    endpoint.port = endpoint.hosted->port();
    return endpoint;
  }
  if (endpoint.port == 0) {
    throw RendezvousError("--rdzv_endpoint " + endpoint.host +
                          ":0: port 0 is only meaningful with --standalone");
  }
  backends::HostQuestion question;
  question.forced = settings.is_host;
  question.local_addr = config.local_addr;
  question.endpoint_host = endpoint.host;
  // is_host decides alone: no name lookups then (they can be slow, and a scale test runs
  // thousands of agents).
  if (!question.forced) {
    question.endpoint_addresses = backends::resolve_numeric(endpoint.host);
    if (config.local_addr) {
      question.local_addr_addresses = backends::resolve_numeric(*config.local_addr);
    }
  }
  const auto hosting = backends::store_hosting(
      question, question.forced ? backends::LocalIdentity{} : backends::local_identity());
  if (hosting == backends::StoreHosting::client) {
    return endpoint;
  }
  try {
    endpoint.hosted =
        start_store(backends::store_bind_address(endpoint.host), endpoint.port, config.secret);
  } catch (const std::exception& error) {
    if (hosting == backends::StoreHosting::required) {
      host_or_join(endpoint, settings.is_host.has_value(), config.secret, error.what());
    }
    // Another agent on this machine was first: use its store.
  }
  return endpoint;
}

// etcd: the lease is the heartbeat, so it lives as long as torchrun's keep-alive allows a node
// to stay silent (keep_alive_interval x keep_alive_max_attempt); renewed three times per TTL.
// An op tries the members for at most min(join_timeout, kEtcdFailoverLimit): long enough to
// ride out a leader election, short enough that a lost quorum is reported in seconds.
backends::etcd::EtcdOptions etcd_options(backends::etcd::EtcdOptions options,
                                         const round::RdzvSettings& settings) {
  const auto ttl = std::max<std::chrono::seconds>(
      kEtcdMinLeaseTtl, std::chrono::ceil<std::chrono::seconds>(settings.keep_alive_interval *
                                                                settings.keep_alive_max_attempt));
  options.lease_ttl = ttl;
  options.keepalive_interval = std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 3;
  options.op_timeout = std::min(kEtcdOpTimeout, millis(settings.read_timeout));
  options.failover_budget =
      std::max(options.op_timeout, std::min(kEtcdFailoverLimit, millis(settings.join_timeout)));
  return options;
}

// static: node 0 hosts the store at the master address (also the workers' store).
Endpoint static_endpoint(const RendezvousConfig& config) {
  Endpoint endpoint;
  endpoint.host = config.host;
  endpoint.port = config.port;
  if (config.node_rank == 0) {
    try {
      endpoint.hosted =
          start_store(backends::store_bind_address(endpoint.host), endpoint.port, config.secret);
    } catch (const std::exception& error) {
      throw RendezvousError("node 0 cannot host the store at " + endpoint.host + ":" +
                            std::to_string(endpoint.port) +
                            " (--master_addr/--master_port): " + error.what());
    }
  }
  return endpoint;
}

const backends::etcd::EtcdOptions& etcd_members(const RendezvousConfig& config) {
  if (!config.etcd) {
    throw RendezvousError("--rdzv_backend etcd without etcd members (--rdzv_endpoint)");
  }
  return *config.etcd;
}

std::unique_ptr<backends::KvBackend> etcd_client(const backends::etcd::EtcdOptions& options,
                                                 boost::asio::io_context& io) {
  try {
    return std::make_unique<backends::etcd::EtcdKv>(io, options);
  } catch (const std::invalid_argument& error) {
    throw RendezvousError(std::string("etcd: ") + error.what());
  }
}

std::string store_where(const std::string& run_id, const Endpoint& endpoint) {
  return "rendezvous '" + run_id + "' at " + endpoint.host + ":" + std::to_string(endpoint.port);
}

std::unique_ptr<backends::KvBackend> store_client(const Endpoint& endpoint,
                                                  const RendezvousConfig& config,
                                                  std::chrono::milliseconds connect_timeout,
                                                  boost::asio::io_context& io) {
  backends::StoreKvOptions options;
  options.host = endpoint.host;
  options.port = endpoint.port;
  options.connect_timeout = connect_timeout;
  options.reconnect_timeout = kReconnectBudget;
  options.op_timeout = millis(config.settings.read_timeout);
  options.secret = config.secret;
  return std::make_unique<backends::StoreKv>(io, options);
}

std::string start_line(const RendezvousConfig& config, const round::MachineConfig& machine) {
  std::string line = "joining " + machine.where;
  if (machine.hosts_store) {
    line += ", hosting its store";
  }
  if (config.secret.empty()) {
    return line + "; open rendezvous (unauthenticated: no job secret)";
  }
  return line + "; job secret from " + config.secret_source;
}

}  // namespace

RendezvousSetup set_up_rendezvous(const RendezvousConfig& config, boost::asio::io_context& io) {
  RendezvousSetup setup;
  round::MachineConfig& m = setup.machine;
  m.settings = config.settings;  // parsed once, by the launcher
  m.run_id = config.run_id;
  m.self.addr = config.local_addr ? *config.local_addr : backends::default_local_address();
  m.self.pid = ::getpid();
  m.self.nonce = common::random_hex(8);
  m.self.nproc_per_node = config.shape.nproc_per_node;
  m.self.rank_hint = config.node_rank_hint;
  m.self.min_nodes = config.min_nodes;
  m.self.max_nodes = config.max_nodes;
  m.max_restarts = config.shape.max_restarts;
  m.exit_barrier_timeout = config.exit_barrier_timeout;
  m.captures_stacks_for_peers = config.captures_stacks_for_peers;
  m.node_check_interval = config.node_check_interval;
  setup.workers_store_addr = config.standalone ? "localhost" : m.self.addr;

  Endpoint endpoint;
  if (config.backend == RendezvousBackend::c10d) {
    m.mode = round::RoundMode::kDynamic;
    endpoint = c10d_endpoint(config, m.settings);
  } else if (config.backend == RendezvousBackend::static_store) {
    m.mode = round::RoundMode::kStatic;
    if (config.node_rank < 0 || config.node_rank >= config.max_nodes) {
      throw RendezvousError("--node_rank " + std::to_string(config.node_rank) +
                            " is not below --nnodes " + std::to_string(config.max_nodes));
    }
    m.self.rank_hint = config.node_rank;
    endpoint = static_endpoint(config);
    m.static_master_addr = endpoint.host;
    m.static_master_port = endpoint.port;
  } else {
    m.mode = round::RoundMode::kDynamic;
    m.hosts_store = false;
    const auto& etcd = etcd_members(config);
    m.where =
        "rendezvous '" + m.run_id + "' on etcd " + backends::etcd::format_endpoints(etcd.endpoints);
    setup.backend = etcd_client(etcd_options(etcd, m.settings), io);
    // etcd guards its keys itself (its own authentication); the job secret is the store's.
    setup.start_line = "joining " + m.where;
    return setup;
  }
  m.hosts_store = endpoint.hosted != nullptr;
  m.where = store_where(m.run_id, endpoint);
  // An unreachable endpoint is a join that never starts: ops wait for the store until
  // join_timeout (its host may start after this agent).
  setup.backend = store_client(endpoint, config, millis(m.settings.join_timeout), io);
  setup.hosted_store = std::move(endpoint.hosted);
  setup.start_line = start_line(config, m);
  return setup;
}

RendezvousClient connect_to_rendezvous(const RendezvousConfig& config, boost::asio::io_context& io,
                                       std::chrono::milliseconds connect_limit) {
  RendezvousClient client;
  if (config.standalone) {
    throw RendezvousError(
        "a --standalone job's rendezvous store is private to its agent; give the job's "
        "--rdzv_backend, --rdzv_endpoint and --rdzv_id");
  }
  if (config.backend == RendezvousBackend::etcd) {
    const auto& etcd = etcd_members(config);
    client.where = "rendezvous '" + config.run_id + "' on etcd " +
                   backends::etcd::format_endpoints(etcd.endpoints);
    auto options = etcd_options(etcd, config.settings);
    options.failover_budget = std::min(options.failover_budget, connect_limit);
    client.backend = etcd_client(options, io);
    return client;
  }
  Endpoint endpoint;
  endpoint.host = config.host;
  endpoint.port = config.port;
  if (endpoint.port == 0)
    throw RendezvousError("--rdzv_endpoint " + endpoint.host + ":0 names no port");
  client.where = store_where(config.run_id, endpoint);
  client.backend = store_client(endpoint, config, connect_limit, io);
  return client;
}

}  // namespace ddprun::agent
