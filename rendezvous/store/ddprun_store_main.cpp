// ddprun-store: the standalone rendezvous store daemon. Prints the bound host:port as the
// first line of standard output, serves until SIGTERM or SIGINT, then stops cleanly.

#include <pthread.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "common/key_material.hpp"
#include "rendezvous/store/daemon_options.hpp"
#include "rendezvous/store/descriptor_limit.hpp"
#include "rendezvous/store/job_secret.hpp"
#include "rendezvous/store/store_server.hpp"

namespace {

using namespace ddprun::rendezvous::store;

// Many clients means many descriptors (PyTorch <= 2.0 clients open two each): like any
// production daemon, take the soft limit up to the hard one, and the hard one up to
// --max-connections where we may (CAP_SYS_RESOURCE). When the limit stays below it, the default
// shrinks to fit (a note at info level); a limit the user asked for stays, with a warning that
// says why it cannot be honoured. Either is printed after the address line.
struct LogNote {
  StoreLogLevel level = StoreLogLevel::info;
  std::string text;
};

std::optional<LogNote> fit_descriptor_limit(DaemonOptions& options) {
  constexpr rlim_t kSpare = 64;  // listening socket, standard streams, logs
  auto& limits = options.server.limits;
  const rlim_t wanted = limits.max_connections + kSpare;
  const auto limit = raise_descriptor_limit(wanted);
  const auto shortage = descriptor_shortage(limit, wanted);
  if (!shortage) {
    return std::nullopt;
  }
  if (options.max_connections_given) {
    return LogNote{StoreLogLevel::warning,
                   "--max-connections " + std::to_string(limits.max_connections) + " " + *shortage +
                       "; accepts beyond it fail with EMFILE and are retried"};
  }
  limits.max_connections = connections_within(limit, kSpare);
  return LogNote{StoreLogLevel::info, "at most " + std::to_string(limits.max_connections) +
                                          " connections: the descriptor limit (RLIMIT_NOFILE " +
                                          std::to_string(limit.soft) + ") allows no more"};
}

std::optional<std::string> environment_value(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

// The value where it lies in the environment, uncopied: it is wiped there once read.
std::optional<std::string_view> environment_view(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string_view>(value) : std::nullopt;
}

// Takes the job secret in: from the file or the environment, whose copy is wiped and removed;
// the process holding it is not dumpable. Returns false, having said why, when it cannot be used.
bool take_job_secret(DaemonOptions& options) {
  try {
    auto secret = resolve_job_secret(options.secret_file, "--secret-file",
                                     environment_value(kSecretFileVariable),
                                     environment_view(kSecretVariable));
    ddprun::common::erase_from_process_environment(kSecretVariable);
    if (!secret) {
      return true;
    }
    if (!ddprun::common::make_not_dumpable()) {
      std::cerr << "ddprun-store: prctl(PR_SET_DUMPABLE, 0) failed: " << std::strerror(errno)
                << "; expected to keep the job secret out of core dumps\n";
      return false;
    }
    options.server.secret = std::move(secret->value);
    store_log(options.server.log_level, StoreLogLevel::info,
              "job secret from " + secret->source + ": the agents' keys need it");
    return true;
  } catch (const JobSecretError& error) {
    std::cerr << "ddprun-store: " << error.what() << "; expected " << kSecretExpectation << "\n";
    return false;
  }
}

int run(int argc, char** argv) {
  const auto parsed = parse_daemon_options(std::vector<std::string>(argv + 1, argv + argc));
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    std::cerr << "ddprun-store: " << *error << "\n" << daemon_usage();
    return 2;
  }
  auto options = std::get<DaemonOptions>(parsed);
  if (options.show_help) {
    std::cout << daemon_usage();
    return 0;
  }
  if (!take_job_secret(options)) {
    return 2;
  }

  // Block the stop signals before the server's thread starts, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  const auto limit_note = fit_descriptor_limit(options);

  const auto server = StoreServer::start(options.server);
  // The address is the first line whatever else is said (scripts read it).
  std::cout << server->host() << ":" << server->port() << std::endl;
  if (limit_note) {
    store_log(options.server.log_level, limit_note->level, limit_note->text);
  }

  int received = 0;
  sigwait(&stop_signals, &received);
  store_log(options.server.log_level, StoreLogLevel::info,
            "stopping on signal " + std::to_string(received));
  server->stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
