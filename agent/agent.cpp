// run_agent: the process-wide set-up around the agent's event loop (agent_loop.hpp).

#include "agent/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "agent/base/event_log.hpp"
#include "agent/base/node_name.hpp"
#include "agent/loop/agent_loop.hpp"
#include "agent/loop/signal_channel.hpp"
#include "rendezvous/round/machine_io.hpp"

namespace ddprun::agent {

namespace {

std::vector<int> signals_to_forward(const SupervisionConfig& config) {
  std::vector<int> handled = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (int sig : config.signals_to_handle) {
    if (std::find(handled.begin(), handled.end(), sig) == handled.end())
      handled.push_back(sig);
  }
  return handled;
}

}  // namespace

int run_agent(const AgentConfig& config) {
  // Writes to a closed console or tee pipe must fail with EPIPE, not kill the agent.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    // Before any thread exists (the hosted stores' loops): every thread then blocks the handled
    // signals, and they reach the event loop through the channel's descriptor.
    SignalChannel signals(signals_to_forward(config.supervision));
    EventLog events(config.events_file, node_name(config.rendezvous.local_addr));
    AgentLoop loop(config, signals, events);
    return loop.run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddprun: %s\n", error.what());
    return rendezvous::round::kExitFailure;
  }
}

}  // namespace ddprun::agent
