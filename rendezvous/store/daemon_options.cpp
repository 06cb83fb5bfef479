#include "rendezvous/store/daemon_options.hpp"

#include <charconv>
#include <functional>
#include <map>

namespace ddprun::rendezvous::store {
namespace {

bool parse_size(const std::string& text, std::size_t& out) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return false;
  }
  out = value;
  return true;
}

}  // namespace

std::string daemon_usage() {
  return "ddprun-store: a TCPStore-compatible rendezvous store (PyTorch <= 2.0 and >= 2.2\n"
         "wire protocols). Prints the bound host:port first, stops on SIGTERM/SIGINT.\n"
         "Usage: ddprun-store [--option value | --option=value]...\n"
         "  --host H                  address to listen on: 0.0.0.0 (default), ::, a name\n"
         "  --port P                  port to listen on; 0 (default) picks a free one\n"
         "  --max-key-bytes N         longest key accepted (8192)\n"
         "  --max-value-bytes N       longest value accepted (8388608)\n"
         "  --max-keys-per-request N  most keys in one CHECK/WAIT/MULTI_* (131072)\n"
         "  --max-memory-bytes N      memory budget: data, waits, buffers (4294967296)\n"
         "  --max-connections N       most concurrent connections (65536, or what the\n"
         "                            descriptor limit allows when that is less)\n"
         "  --legacy-generation G     clients without VALIDATE speak g0 (<= 2.0, default)\n"
         "                            or g1 (2.1)\n"
         "  --log-level L             quiet, error, warning (default), info, debug\n"
         "  --secret-file PATH        the job secret (a file only its owner may read): the\n"
         "                            agents' keys (under ddprun/) are served only to\n"
         "                            agents that prove they know it (the store proves it\n"
         "                            first); PyTorch clients need nothing, and share their\n"
         "                            own limits (README: Job secret). Else\n"
         "                            DDPRUN_RDZV_SECRET_FILE or DDPRUN_RDZV_SECRET\n"
         "                            (at least 16 bytes: head -c 32 /dev/urandom | base64)\n"
         "  -h, --help                show this help\n";
}

namespace {

using OptionHandlers = std::map<std::string, std::function<bool(const std::string&)>>;

// What each option does to `options`; a handler returns false for a value it cannot take.
OptionHandlers option_handlers(DaemonOptions& options) {
  auto& server = options.server;
  auto size_option = [](std::size_t& target) {
    return [&target](const std::string& value) { return parse_size(value, target); };
  };
  return {
      {"--host",
       [&](const std::string& value) {
         server.host = value;
         return !value.empty();
       }},
      {"--port",
       [&](const std::string& value) {
         std::size_t port = 0;
         if (!parse_size(value, port) || port > 65535) {
           return false;
         }
         server.port = static_cast<std::uint16_t>(port);
         return true;
       }},
      {"--max-key-bytes", size_option(server.limits.max_key_bytes)},
      {"--max-value-bytes", size_option(server.limits.max_value_bytes)},
      {"--max-keys-per-request", size_option(server.limits.max_keys_per_request)},
      {"--max-memory-bytes", size_option(server.limits.max_total_bytes)},
      {"--max-connections",
       [&](const std::string& value) {
         options.max_connections_given = true;
         return parse_size(value, server.limits.max_connections);
       }},
      {"--legacy-generation",
       [&](const std::string& value) {
         if (value == "g0") {
           server.legacy_generation = WireGeneration::g0;
           return true;
         }
         if (value == "g1") {
           server.legacy_generation = WireGeneration::g1;
           return true;
         }
         return false;
       }},
      {"--secret-file",
       [&](const std::string& value) {
         options.secret_file = value;
         return !value.empty();
       }},
      {"--log-level",
       [&](const std::string& value) {
         const auto level = parse_log_level(value);
         if (level) {
           server.log_level = *level;
         }
         return level.has_value();
       }},
  };
}

}  // namespace

std::variant<DaemonOptions, std::string> parse_daemon_options(
    const std::vector<std::string>& args) {
  DaemonOptions options;
  const auto& server = options.server;
  const OptionHandlers handlers = option_handlers(options);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    if (name == "-h" || name == "--help") {
      options.show_help = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    if (const auto equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
      has_value = true;
    }
    const auto handler = handlers.find(name);
    if (handler == handlers.end()) {
      return "unknown option '" + name + "'";
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return "option '" + name + "' needs a value";
      }
      value = args[++i];
    }
    if (!handler->second(value)) {
      return "invalid value '" + value + "' for " + name;
    }
  }
  if (server.limits.max_connections == 0 || server.limits.max_total_bytes == 0) {
    return "--max-connections and --max-memory-bytes must be positive";
  }
  return options;
}

}  // namespace ddprun::rendezvous::store
