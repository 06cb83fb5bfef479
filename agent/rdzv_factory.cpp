// make_rendezvous_handler: picks the backend, decides whether this agent hosts the store, and
// starts it in-process when it does.

#include <cerrno>
#include <cstdio>

#include "agent/rdzv_c10d_handler.hpp"
#include "agent/rdzv_host_detection.hpp"
#include "agent/rdzv_settings.hpp"
#include "agent/rdzv_static_handler.hpp"
#include "agent/rendezvous_handler.hpp"

namespace ddprun::agent {
namespace {

using rdzv::StoreEndpoint;

std::unique_ptr<rendezvous::store::StoreServer> start_store(const std::string& bind_host, uint16_t port) {
  rendezvous::store::StoreServerOptions options;
  options.host = bind_host;
  options.port = port;
  return rendezvous::store::StoreServer::start(options);
}

// c10d: host when the heuristic (or is_host) says so; a heuristic host that cannot bind (another
// agent on this machine was first) becomes a client, as torchrun does.
StoreEndpoint c10d_endpoint(const launcher::LaunchConfig& config,
                            const rdzv::RdzvSettings& settings) {
  StoreEndpoint endpoint;
  endpoint.host = config.rdzv_host.empty() ? std::string("localhost") : config.rdzv_host;
  endpoint.port = config.rdzv_port.value_or(29400);
  if (config.standalone) {
    // A private store on a free port; only this agent uses it.
    endpoint.hosted = start_store("127.0.0.1", 0);
    endpoint.host = "127.0.0.1";
    endpoint.port = endpoint.hosted->port();
    return endpoint;
  }
  rdzv::HostQuestion question;
  question.forced = settings.is_host;
  question.local_addr = config.local_addr;
  question.endpoint_host = endpoint.host;
  question.endpoint_addresses = rdzv::resolve_numeric(endpoint.host);
  if (config.local_addr) {
    question.local_addr_addresses = rdzv::resolve_numeric(*config.local_addr);
  }
  if (endpoint.port == 0) {
    throw RendezvousError("--rdzv_endpoint " + endpoint.text() +
                          ": port 0 is only meaningful with --standalone");
  }
  const bool host = rdzv::should_host_store(question, question.forced || config.local_addr
                                                          ? rdzv::LocalIdentity{}
                                                          : rdzv::local_identity());
  if (!host) {
    return endpoint;
  }
  try {
    endpoint.hosted = start_store(rdzv::store_bind_address(endpoint.host), endpoint.port);
  } catch (const std::exception& error) {
    if (settings.is_host) {
      throw RendezvousError("cannot host the rendezvous store at " + endpoint.text() +
                            " (is_host=1): " + error.what());
    }
    // Someone else on this machine hosts it: use theirs.
  }
  return endpoint;
}

// static: node 0 hosts the store at the master address (also the workers' store).
StoreEndpoint static_endpoint(const launcher::LaunchConfig& config) {
  StoreEndpoint endpoint;
  endpoint.host = config.rdzv_host.empty() ? config.master_addr : config.rdzv_host;
  endpoint.port = config.rdzv_port.value_or(config.master_port);
  if (config.node_rank == 0) {
    try {
      endpoint.hosted = start_store(rdzv::store_bind_address(endpoint.host), endpoint.port);
    } catch (const std::exception& error) {
      throw RendezvousError("node 0 cannot host the store at " + endpoint.text() +
                            " (--master_addr/--master_port): " + error.what());
    }
  }
  return endpoint;
}

}  // namespace

std::unique_ptr<RendezvousHandler> make_rendezvous_handler(const launcher::LaunchConfig& config) {
  rdzv::RdzvSettings settings = rdzv::parse_rdzv_settings(config.rdzv_conf);
  const std::string local_addr =
      config.local_addr ? *config.local_addr : rdzv::default_local_address();
  std::string run_id = config.rdzv_id;
  if (config.standalone && (run_id.empty() || run_id == "none")) {
    run_id = rdzv::random_hex(16);
  }
  if (config.standalone || config.rdzv_backend == "c10d") {
    return std::make_unique<rdzv::C10dRendezvous>(config, settings, c10d_endpoint(config, settings),
                                                  run_id, local_addr);
  }
  if (config.rdzv_backend == "static") {
    if (auto it = config.rdzv_conf.find("timeout"); it != config.rdzv_conf.end()) {
      // static's own key (torchrun injects 900); c10d's join_timeout wins when both are given.
      if (!config.rdzv_conf.contains("join_timeout")) {
        settings.join_timeout_s =
            rdzv::parse_rdzv_settings({{"join_timeout", it->second}}).join_timeout_s;
      }
    }
    if (config.node_rank < 0 || config.node_rank >= config.max_nodes) {
      throw RendezvousError("--node_rank " + std::to_string(config.node_rank) +
                            " is not below --nnodes " + std::to_string(config.max_nodes));
    }
    return std::make_unique<rdzv::StaticRendezvous>(config, settings, static_endpoint(config),
                                                    run_id, local_addr);
  }
  throw RendezvousError("unsupported --rdzv_backend '" + config.rdzv_backend +
                        "' (ddprun supports static and c10d)");
}

}  // namespace ddprun::agent
