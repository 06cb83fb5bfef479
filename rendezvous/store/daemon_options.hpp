#pragma once
// The ddprun-store command line, parsed without I/O so that it can be unit-tested.

#include <string>
#include <variant>
#include <vector>

#include "rendezvous/store/store_server.hpp"

namespace ddprun::rendezvous::store {

struct DaemonOptions {
  StoreServerOptions server;
  bool show_help = false;
};

// The options, or a message naming the argument that is wrong.
std::variant<DaemonOptions, std::string> parse_daemon_options(const std::vector<std::string>& args);

std::string daemon_usage();

}  // namespace ddprun::rendezvous::store
