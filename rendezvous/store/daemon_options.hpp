#pragma once
// The ddprun-store command line, parsed without I/O so that it can be unit-tested.

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/store/store_server.hpp"

namespace ddprun::rendezvous::store {

struct DaemonOptions {
  StoreServerOptions server;  // server.secret is read by main, from secret_file or the env
  std::optional<std::string> secret_file;  // --secret-file
  // --max-connections was given: a limit the descriptors cannot honour is warned about; the
  // default instead shrinks to what the descriptor limit allows.
  bool max_connections_given = false;
  bool show_help = false;
};

// The options, or a message naming the argument that is wrong.
std::variant<DaemonOptions, std::string> parse_daemon_options(const std::vector<std::string>& args);

std::string daemon_usage();

}  // namespace ddprun::rendezvous::store
